-- What a recorded message is for: the card itself, or a prompt that asked for the next message
-- (Telegram's "Other…"). Retraction edits cards and removes prompts, so the outcome shows once.
ALTER TABLE deliveries ADD COLUMN role TEXT NOT NULL DEFAULT 'card' CHECK (role IN ('card', 'prompt'));
