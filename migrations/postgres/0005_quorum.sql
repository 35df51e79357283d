-- An approval may need several distinct approvers: how many, and who approved so far (a
-- JSON list of {user, name, via, at}; NULL while nobody has).
ALTER TABLE questions ADD COLUMN quorum BIGINT NOT NULL DEFAULT 1 CHECK (quorum >= 1);
ALTER TABLE questions ADD COLUMN approvals TEXT;
