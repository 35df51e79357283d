-- The conversation a card was shown in: a question escalated to a second conversation has a
-- card in each, and a start-up shows again whichever of them was never delivered. NULL for
-- messages recorded before this column (counted as the question's own conversation) and for
-- prompts.
ALTER TABLE deliveries ADD COLUMN conversation TEXT;
