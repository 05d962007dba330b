-- schema.sql - the tuning database schema, the only place it is written down.
--
-- Built into the library (cmake/embed.cmake). Each "-- @version N" section migrates a database
-- at version N-1 to version N; a new database runs every section in order, in one transaction.
-- A schema change therefore appends a section and never edits an old one: databases already on
-- disk only ever see the sections after their PRAGMA user_version. The highest section number is
-- the version this build writes. application_id and user_version are set by db_open.c.

-- @version 1

-- One row per machine. The fingerprint hashes every other CPU field (hardware.c); compiler is
-- informational, since artifacts carry their own compiler version.
CREATE TABLE hardware (
    id INTEGER PRIMARY KEY,
    fingerprint TEXT NOT NULL UNIQUE,
    arch TEXT NOT NULL,
    model TEXT NOT NULL,
    family INTEGER NOT NULL,
    model_id INTEGER NOT NULL,
    stepping INTEGER NOT NULL,
    features TEXT NOT NULL,
    cores INTEGER NOT NULL,
    l1d_bytes INTEGER NOT NULL,
    l2_bytes INTEGER NOT NULL,
    l3_bytes INTEGER NOT NULL,
    compiler TEXT,
    created TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
);

-- Every measured variant, kept even when it loses, so that a changed search space or a second
-- look does not repeat work. Timings are NULL when there are none (a wrong or failed variant).
CREATE TABLE measurements (
    id INTEGER PRIMARY KEY,
    hardware_id INTEGER NOT NULL REFERENCES hardware (id),
    target TEXT NOT NULL,
    op TEXT NOT NULL,
    dtype TEXT NOT NULL,
    H INTEGER NOT NULL CHECK (H > 0),
    rows INTEGER NOT NULL CHECK (rows > 0),
    affine INTEGER NOT NULL CHECK (affine IN (0, 1)),
    variant TEXT NOT NULL,
    template_hash TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'wrong', 'failed')),
    message TEXT,
    artifact_key TEXT,
    compile_ms REAL,
    median_ns REAL,
    min_ns REAL,
    max_ns REAL,
    gbps REAL,
    copy_gbps REAL,
    max_error REAL,
    measured_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
    UNIQUE (hardware_id, target, op, dtype, H, rows, affine, variant, template_hash)
);

-- Compiled kernels, keyed by a hash of source, flags and compiler version, so the runtime can
-- load a winner without compiling anything.
CREATE TABLE artifacts (
    key TEXT PRIMARY KEY NOT NULL,
    source TEXT NOT NULL,
    compiler TEXT,
    flags TEXT,
    symbol TEXT NOT NULL,
    object BLOB,
    shared BLOB,
    created TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
);

-- The winner per shape and rows bucket (lntune_rows_bucket): what the runtime dispatches to.
CREATE TABLE best (
    id INTEGER PRIMARY KEY,
    hardware_id INTEGER NOT NULL REFERENCES hardware (id),
    target TEXT NOT NULL,
    op TEXT NOT NULL,
    dtype TEXT NOT NULL,
    H INTEGER NOT NULL CHECK (H > 0),
    rows_bucket INTEGER NOT NULL CHECK (rows_bucket BETWEEN 0 AND 6),
    affine INTEGER NOT NULL CHECK (affine IN (0, 1)),
    variant TEXT NOT NULL,
    artifact_key TEXT,
    threads INTEGER NOT NULL,
    tuned_rows INTEGER NOT NULL,
    median_ns REAL,
    gbps REAL,
    copy_gbps REAL,
    max_error REAL,
    naive_ns REAL,
    chosen_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
    UNIQUE (hardware_id, target, op, dtype, H, rows_bucket, affine)
);

-- @version 2

-- GPUs. A CUDA device has its own hardware row (kind 'cuda'): arch is "sm_90", model the device
-- name, cores its multiprocessor count, l2_bytes its L2 cache, compiler the NVRTC version, and
-- family/model_id/stepping/l1d_bytes/l3_bytes are 0. Its fingerprint hashes name, compute
-- capability, multiprocessors, L2 and memory bus (hardware.c); the driver version is recorded.
ALTER TABLE hardware ADD COLUMN kind TEXT NOT NULL DEFAULT 'cpu' CHECK (kind IN ('cpu', 'cuda'));
ALTER TABLE hardware ADD COLUMN compute_capability INTEGER;
ALTER TABLE hardware ADD COLUMN memory_bus_bits INTEGER;
ALTER TABLE hardware ADD COLUMN driver_version INTEGER;

-- CUDA artifacts: object holds the cubin for the device's exact architecture, ptx the PTX of the
-- same compile (loaded by the driver's JIT where the cubin does not fit).
ALTER TABLE artifacts ADD COLUMN ptx TEXT;

-- @version 3

-- Size crossovers of the built-in kernels measured on a machine (the tuner measures them at its
-- first CPU tune there, and again when the templates change), which liblntune follows instead of
-- cache-size rules. 'streaming_bytes': the bytes of x and y a call moves from which the built-in's
-- non-temporal stores beat its plain ones, at that many threads.
CREATE TABLE crossovers (
    hardware_id INTEGER NOT NULL REFERENCES hardware (id),
    name TEXT NOT NULL,
    threads INTEGER NOT NULL CHECK (threads > 0),
    value INTEGER NOT NULL,
    template_hash TEXT NOT NULL,
    measured_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
    PRIMARY KEY (hardware_id, name, threads)
);

-- Whether a winner's kernel reads H at run time (the CPU templates' h=runtime): liblntune serves a
-- shape never tuned with the nearest such winner of the same op, dtype and affine (dispatch.c).
ALTER TABLE best ADD COLUMN any_h INTEGER NOT NULL DEFAULT 0 CHECK (any_h IN (0, 1));

-- @version 4

-- The digest of each artifact's code (lntune_artifact_code_digest: SHA-256 over the source, the
-- shared object, the object or cubin, and the PTX), recorded when it is stored. liblntune loads an
-- artifact only when its bytes hash to this (dispatch.c, cuda_dispatch.c), so code altered or
-- planted after lntune stored it never runs. Artifacts stored before this version get the digest
-- of what they hold at the migration, which only lntune itself runs, on a database it opens
-- read-write.
ALTER TABLE artifacts ADD COLUMN code_sha256 TEXT;
UPDATE artifacts SET code_sha256 = lntune_code_sha256(source, shared, object, ptx);

-- @version 5

-- A fixed-H winner's run-time-H twin: the winner's variant with h=runtime (the same code reading H
-- at run time), verified at H = 1 and 17 besides the tuned H and timed at the tuned shape. A fixed-H
-- kernel serves only its own H, so without it a shape never tuned fell to the generic built-in
-- even beside a tuned neighbour; liblntune serves it by the nearest H's twin (dispatch.c).
-- twin_variant NULL: never tried (the winner reads H at run time itself, the target has no h knob,
-- or the winner was stored before this version: the next tuning run tries it); twin_artifact_key
-- NULL beside a variant: tried and declined (no faster than the built-in at the tuned shape, or
-- failed its check), serving nothing.
ALTER TABLE best ADD COLUMN twin_variant TEXT;
ALTER TABLE best ADD COLUMN twin_artifact_key TEXT;
ALTER TABLE best ADD COLUMN twin_median_ns REAL;

-- @version 6

-- Whether a winner's kernel keeps its speed on rows of any alignment (the CPU templates' plain
-- stores; non-temporal stores write partial lines on rows that do not start a cache line, and a
-- store=nt 4096x768 winner ran 4096x777 at 0.40x the built-in's speed). liblntune gives a kernel
-- with 0 no H whose rows are less aligned than its own (dispatch.c's serves()); a twin shares its
-- winner's. Winners stored before this version keep 0 (the rule as before) until tuned again;
-- the CPU forward templates changed with this version, so the next lntune run tunes those again.
ALTER TABLE best ADD COLUMN any_alignment INTEGER NOT NULL DEFAULT 0 CHECK (any_alignment IN (0, 1));

-- @version 7

-- What a winner's figure is worth (issue 56): the first and third quartile of its speed against the
-- copy of the same bytes over the paired blocks of its final runs (copy time / its time), and, when
-- other processes held a core through its final runs after the tuner waited for quiet (or the
-- copy's time moved by more than 30% between them), what was seen. Such a winner is served, shown
-- as measured under load, and measured again by the next tune of its shape.
ALTER TABLE best ADD COLUMN ratio_lo REAL;
ALTER TABLE best ADD COLUMN ratio_hi REAL;
ALTER TABLE best ADD COLUMN under_load TEXT;

-- @version 8

-- How far from its own H a winner's run-time-H kernel (the winner, or its twin) still serves
-- (issue 56): the tuner times it beside the built-in at H x4, x16, ... and H /4, /16, ... (the
-- same bytes) until it loses, and stores the H between the last step it held and the first it
-- lost (the geometric mean). liblntune's nearest-H walk passes over a winner whose reach leaves
-- the call's H out (dispatch.c). NULL: not measured (stored before this version, or a target
-- that does not measure it): no limit, as before.
ALTER TABLE best ADD COLUMN reach_lo INTEGER;
ALTER TABLE best ADD COLUMN reach_hi INTEGER;
