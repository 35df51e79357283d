-- Who may answer a run's questions when it was started with a list (runs started through the
-- API name the people, since the API token that starts them is nobody in the chat). JSON, as
-- questions.answerers; NULL: the channel's rule.
ALTER TABLE runs ADD COLUMN answerers TEXT;
