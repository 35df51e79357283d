-- Grants may expire (gateway.grant_ttl) and say how people know who set them.
ALTER TABLE grants ADD COLUMN expires_at BIGINT, ADD COLUMN granted_name TEXT;
