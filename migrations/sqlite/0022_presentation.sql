-- How a question's cards read: askgate's language there (`en`, `zh-CN`) and the time zone their
-- times are shown in (an IANA name; NULL: UTC).
ALTER TABLE questions ADD COLUMN locale TEXT NOT NULL DEFAULT 'en';
ALTER TABLE questions ADD COLUMN time_zone TEXT;
