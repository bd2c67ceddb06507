-- gpuwatch alert routing, schema version 4: silences, and what each
-- receiver was last told about each alert (for repeat notifications, and
-- so that a restart neither repeats nor forgets a notification).

-- Silences: alerts whose labels match every matcher are not notified
-- between starts_ms and ends_ms. Expiring a silence sets ends_ms to the
-- time of expiry; expired silences are kept for 5 days, then removed.
CREATE TABLE silence (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    matchers TEXT NOT NULL,         -- JSON list of {name, value, isRegex, isEqual}
    starts_ms INTEGER NOT NULL,     -- ms since the Unix epoch
    ends_ms INTEGER NOT NULL,
    created_by TEXT NOT NULL,
    comment TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL
);
CREATE INDEX silence_ends ON silence (ends_ms);

-- One row per (receiver, alert fingerprint) whose firing the receiver was
-- sent: written in the transaction that adds the outbox row, removed with
-- the resolved notification. last_ms is when the firing was last sent; a
-- firing alert is sent again once its receiver's repeat_interval passed.
CREATE TABLE alert_notified (
    receiver TEXT NOT NULL,         -- [[receivers]] name
    fingerprint TEXT NOT NULL,      -- the alert's stable dedup key
    alertname TEXT NOT NULL,
    last_ms INTEGER NOT NULL,       -- ms since the Unix epoch
    PRIMARY KEY (receiver, fingerprint)
);

-- Present (one row) until the agent's first start on this schema, which
-- records every alert then firing as sent to every receiver whose route
-- takes it, and removes the row: gpuwatch before this schema sent each
-- firing alert to every receiver when it fired, so upgrading must not send
-- them again. A new database has no firing alerts: nothing is recorded.
CREATE TABLE alert_notified_seed (id INTEGER PRIMARY KEY CHECK (id = 1));
INSERT INTO alert_notified_seed (id) VALUES (1);
