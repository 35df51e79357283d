// Forms: a question with `form` (a form, or several questions asked together) is answered with
// one control per field, in order, and sent as one object. askgate checks it; a refused answer's
// hint shows beside the form and beside the field it names, and what was typed stays.
// Served after page.js, as part of the same script (see page.rs).

// What people read as a field's name: its title, else its key (askgate's hints start with it).
function fieldLabel(field) { return field.title || field.key; }

// Two digits.
function pad(n) { return String(n).padStart(2, "0"); }

// A datetime-local input's value (local time) as RFC 3339 with the local offset.
function rfc3339(local) {
  const d = new Date(local);
  if (isNaN(d)) return null;
  const offset = -d.getTimezoneOffset(), abs = Math.abs(offset);
  return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + "T" + pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds())
    + (offset >= 0 ? "+" : "-") + pad(Math.floor(abs / 60)) + ":" + pad(abs % 60);
}

// An RFC 3339 time as a datetime-local input's value, in local time.
function localDateTime(text) {
  const d = new Date(text);
  if (isNaN(d)) return "";
  return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + "T" + pad(d.getHours()) + ":" + pad(d.getMinutes()) + (d.getSeconds() ? ":" + pad(d.getSeconds()) : "");
}

// The options a choice field lists beyond this many are a select, not radio buttons.
const MAX_RADIOS = 7;

// One field's control. `read()` gives {value} (undefined: left out) or {error} for what the
// browser could not read (half a date, letters in a number).
function fieldControl(field, id) {
  const name = fieldLabel(field);
  const hint = el("p", { class: "hint", id: id + "-hint", hidden: "" });
  const about = field.description ? el("span", { class: "about", id: id + "-about" }, field.description) : null;
  const describedBy = (about ? about.id + " " : "") + hint.id;
  const required = field.required ? el("span", { class: "req" }, " (required)") : null;
  const control = { field, hint, focus: null, read: null, inputs: [] };
  const box = (attrs) => {
    const input = el("input", { "aria-describedby": describedBy, ...attrs });
    control.inputs.push(input);
    return input;
  };
  const cantRead = (input, what) => input.validity && input.validity.badInput ? { error: name + ": " + what } : null;
  switch (field.type) {
    case "number": {
      const attrs = { type: "number", id, step: field.integer ? "1" : "any", inputmode: field.integer ? "numeric" : "decimal" };
      if (field.minimum != null) attrs.min = String(field.minimum);
      if (field.maximum != null) attrs.max = String(field.maximum);
      if (field.required) attrs.required = "";
      const input = box(attrs);
      if (field.default != null) input.value = String(field.default);
      control.read = () => cantRead(input, field.integer ? "a whole number" : "a number") || (input.value.trim() === "" ? {} : { value: Number(input.value) });
      control.node = el("div", { class: "field" }, el("label", { for: id }, name, required), about, input, hint);
      control.focus = input;
      break;
    }
    case "boolean": {
      if (field.default != null) {
        // With a default the box always says something: ticked or not.
        const input = box({ type: "checkbox", id });
        input.checked = field.default === true;
        control.read = () => ({ value: input.checked });
        control.node = el("div", { class: "field" }, el("label", { class: "choice", for: id }, input, " " + name, required), about, hint);
        control.focus = input;
      } else {
        // Without one, neither is picked until the person picks.
        const yes = box({ type: "radio", name: id, value: "yes" }), no = box({ type: "radio", name: id, value: "no" });
        control.read = () => (yes.checked ? { value: true } : no.checked ? { value: false } : {});
        control.node = el("fieldset", { class: "field", "aria-describedby": describedBy }, el("legend", {}, name, required), about,
          el("div", { class: "row" }, el("label", { class: "choice" }, yes, " Yes"), el("label", { class: "choice" }, no, " No")), hint);
        control.focus = yes;
      }
      break;
    }
    case "choice":
      choiceControl(field, id, control, { name, hint, about, required, box, describedBy });
      break;
    default: {
      // askgate's JSON spells the date-time format `date_time` (the schema's spelling, too, is read).
      const type = { email: "email", uri: "url", date: "date", date_time: "datetime-local", "date-time": "datetime-local" }[field.format] || "text";
      const attrs = { type, id };
      if (type !== "date" && type !== "datetime-local") {
        if (field.min_length != null) attrs.minlength = String(field.min_length);
        if (field.max_length != null) attrs.maxlength = String(field.max_length);
      }
      if (field.required) attrs.required = "";
      const input = box(attrs);
      if (field.default != null) input.value = type === "datetime-local" ? localDateTime(field.default) : field.default;
      control.read = () => {
        const bad = cantRead(input, type === "date" ? "a whole date" : "a whole date and time");
        if (bad) return bad;
        const text = input.value.trim();
        if (!text) return {};
        return { value: type === "datetime-local" ? rfc3339(text) : text };
      };
      control.node = el("div", { class: "field" }, el("label", { for: id }, name, required), about, input, hint);
      control.focus = input;
    }
  }
  return control;
}

// A choice: radio buttons (a select when there are many), checkboxes for several, and an
// "Other…" box for words of one's own where they are allowed.
function choiceControl(field, id, control, parts) {
  const { name, hint, about, required, box, describedBy } = parts;
  const defaults = field.default == null ? [] : [].concat(field.default).map(String);
  const known = (v) => field.options.some((o) => o.value === v);
  const ownDefault = defaults.find((v) => !known(v)) || "";
  const optionText = (o) => o.title || o.value;
  let other = null, otherPick = null;
  if (field.other) {
    other = el("input", { type: "text", "aria-label": name + ": your own words", placeholder: "your own words", "aria-describedby": describedBy, value: ownDefault });
    control.inputs.push(other);
  }
  if (!field.multi && field.options.length > MAX_RADIOS) {
    const select = el("select", { id, "aria-describedby": describedBy },
      el("option", { value: "" }, field.required ? "— choose one —" : "— none —"),
      ...field.options.map((o) => el("option", { value: o.value }, optionText(o) + (o.description ? " — " + o.description : ""))));
    control.inputs.push(select);
    select.value = defaults.find(known) || "";
    if (other) {
      // One or the other: choosing an option clears the own words, typing them clears the choice.
      select.addEventListener("change", () => { if (select.value) other.value = ""; });
      other.addEventListener("input", () => { if (other.value) select.value = ""; });
    }
    control.read = () => (select.value ? { value: select.value } : other && other.value.trim() ? { value: other.value.trim() } : {});
    control.node = el("div", { class: "field" }, el("label", { for: id }, name, required), about, select,
      other ? el("div", { class: "other" }, el("span", { "aria-hidden": "true" }, "Other… "), other) : null, hint);
    control.focus = select;
    return;
  }
  const type = field.multi ? "checkbox" : "radio";
  const picks = field.options.map((o) => {
    const input = box({ type, name: id, value: o.value });
    input.checked = defaults.includes(o.value);
    return el("label", { class: "choice" }, input, " " + optionText(o), o.description ? el("span", { class: "about" }, o.description) : null);
  });
  if (other) {
    otherPick = box({ type, name: id, value: "", "aria-label": "Other…" });
    otherPick.checked = ownDefault !== "";
    // Typing one's own words picks them.
    other.addEventListener("input", () => { if (other.value.trim()) otherPick.checked = true; });
    picks.push(el("div", { class: "other" }, el("label", { class: "choice" }, otherPick, " Other…"), other));
  }
  control.read = () => {
    const picked = control.inputs.filter((i) => i.type === type && i.checked && i !== otherPick).map((i) => i.value);
    if (otherPick && otherPick.checked && other.value.trim()) picked.push(other.value.trim());
    if (field.multi) return picked.length ? { value: picked } : {};
    return picked.length ? { value: picked[0] } : {};
  };
  const legend = el("legend", {}, name, required, field.multi ? el("span", { class: "req" }, " (pick any)") : null);
  control.node = el("fieldset", { class: "field", "aria-describedby": describedBy }, legend, about, ...picks, hint);
  control.focus = control.inputs[0];
}

// The index of the field a refusal names (`age: a whole number from 0 to 150`), or -1.
function refusedField(fields, message) {
  let best = -1;
  fields.forEach((f, i) => {
    const name = fieldLabel(f);
    if (message.startsWith(name + ": ") && (best < 0 || name.length > fieldLabel(fields[best]).length)) best = i;
  });
  return best;
}

// A form card's body: the fields, Submit, and the line where a refused answer's hint shows.
// `entry.refused(message)` shows askgate's refusal; nothing typed is cleared.
function formBody(q, entry, send) {
  const id = "q-" + q.id;
  const fields = q.form.fields;
  const controls = fields.map((field, i) => fieldControl(field, id + "-f" + i));
  const hint = el("p", { class: "hint form-hint", id: id + "-hint", role: "alert", hidden: "" });
  const clear = () => {
    hint.hidden = true;
    for (const c of controls) {
      c.hint.hidden = true;
      for (const i of c.inputs) i.removeAttribute("aria-invalid");
    }
  };
  const show = (message, at) => {
    hint.textContent = "Not accepted: " + message;
    hint.hidden = false;
    const c = controls[at];
    if (!c) return;
    c.hint.textContent = message.slice(fieldLabel(c.field).length + 2);
    c.hint.hidden = false;
    for (const i of c.inputs) i.setAttribute("aria-invalid", "true");
    if (c.focus && !c.focus.disabled) c.focus.focus();
  };
  entry.refused = (message) => show(message, refusedField(fields, message));
  const form = el("form", { class: "fields", novalidate: "", "aria-describedby": hint.id, onsubmit: (e) => {
    e.preventDefault();
    clear();
    const value = {};
    for (const [i, c] of controls.entries()) {
      const got = c.read();
      if (got.error) { show(got.error, i); return; }
      if (got.value !== undefined) value[c.field.key] = got.value;
    }
    send(value);
  } }, ...controls.map((c) => c.node), hint, el("div", { class: "row" }, el("button", { type: "submit" }, "Submit")));
  return [form];
}
