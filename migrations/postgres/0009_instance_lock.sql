-- While it lives, an instance holds a session-level advisory lock (the two-key form, first key
-- 1634954087, "askg") on a connection of its own, under the key it records here. PostgreSQL
-- releases the lock as soon as that connection ends, so when the instance's process dies: the
-- survivors take its runs over without waiting for its heartbeat to lapse. An instance that
-- records no key (an older askgate) is judged by its heartbeat alone.
ALTER TABLE instances ADD COLUMN lock_key INTEGER;
