-- Pruning finds old finished runs and old inbound keys by time.
CREATE INDEX runs_final ON runs (updated_at) WHERE status IN ('finished', 'failed', 'cancelled');
CREATE INDEX inbound_created ON inbound (created_at);
