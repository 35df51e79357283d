-- A prompt for a rejection's or a decline's reason is recorded as a `note`, a prompt for the
-- person's own answer or the edited action as a `prompt`: a reply to either is recognised by
-- the stored message it replies to, never by reading the bot's own words back.
ALTER TABLE deliveries DROP CONSTRAINT deliveries_role_check;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_role_check CHECK (role IN ('card', 'prompt', 'note'));
