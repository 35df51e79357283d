-- How people know whoever resolved a question (`@alice`), shown with the outcome. `answered_by`
-- stays the stable id (`telegram:42`) that audits and the API use.
ALTER TABLE questions ADD COLUMN answered_name TEXT;
