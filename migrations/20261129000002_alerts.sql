-- gpuwatch alerting, schema version 2: where the rules engine stands, and
-- every alert transition. The notification outbox will join these (its rows
-- written in the same transaction as the transition).

-- The rules engine's state (one row): alerts pending, firing or recently
-- resolved, counter baselines, anomaly baselines. JSON, as serde writes it.
CREATE TABLE alert_state (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    state TEXT NOT NULL,
    updated_ms INTEGER NOT NULL
);

-- Every change of an alert's state.
CREATE TABLE alert_transition (
    id INTEGER PRIMARY KEY,
    ts INTEGER NOT NULL,            -- ms since the Unix epoch
    alertname TEXT NOT NULL,
    target TEXT NOT NULL,           -- GPU UUID, or "node"
    from_state TEXT NOT NULL,
    to_state TEXT NOT NULL,
    severity TEXT,
    value REAL,
    labels TEXT NOT NULL,           -- JSON object
    annotations TEXT NOT NULL       -- JSON object
);
CREATE INDEX alert_transition_ts ON alert_transition (ts);
