-- gpuwatch notifications, schema version 3: the outbox. One row per
-- (alert transition to firing or resolved) x receiver, written in the same
-- transaction as the transition (src/alerting/store.rs); a receiver's
-- dispatcher deletes a row once the receiver took it, pushes `due_ms` back
-- after a transient failure, and marks it 'failed' after a permanent one.

CREATE TABLE outbox (
    id INTEGER PRIMARY KEY,
    receiver TEXT NOT NULL,         -- [[receivers]] name
    fingerprint TEXT NOT NULL,      -- the alert's stable dedup key
    payload TEXT NOT NULL,          -- JSON, as the receiver gets it
    created_ms INTEGER NOT NULL,    -- ms since the Unix epoch
    due_ms INTEGER NOT NULL,        -- not sent before this
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'failed'))
);
CREATE INDEX outbox_receiver_due ON outbox (receiver, due_ms);
