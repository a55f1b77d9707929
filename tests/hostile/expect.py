"""expect.py - what the hostile-client suite (hostile.py) expects of each probe, in one table.

Each row: the status (or statuses) the client must get, whether the connection must be closed
(True), must stay open (False) or either (None), whether an error must be the API's JSON
error ({"error": {"code", "message"}}, docs/API.md#replies-and-errors), its code, a word its
message must hold (the field at fault), and, for the rows that issue 23 found broken, `fix`:
the defect it names ("23.4") and the branch that fixes it. Those rows fail on code without
that fix; that is the proof the suite finds them. If a fix settles on another documented
code (say 422 for an integer out of range), change its row here and the docs together.

Every probe also checks, whatever its row says, that the node still answers /healthz and
that a refused request wrote nothing (hostile.py: Snapshot).
"""


class E:
    def __init__(self, status, close=None, json=True, code=None, names=None, fix=None):
        self.status = set(status) if isinstance(status, (set, tuple, list)) else {status}
        self.close = close
        self.json = json
        self.code = code
        self.names = names
        self.fix = fix


BAD = "bad_request"

# The bound on one page of GET .../tasks, in reply bytes (issue 23 8: a page of 30 tasks of
# 1 MB each was one 31 MB reply). The probe's page holds more than this, so a page must end
# early, with `next`.
PAGE_REPLY_MAX = 17 * 1024 * 1024

# `kinds` in a claim (issue 23 5): False: only tasks of those kinds, never one without a kind
# (API.md's "only these kinds"); True if the fix settles on handing out kindless tasks too.
KINDS_TAKE_KINDLESS = False

EXPECT = {
    # ---- auth and scopes ------------------------------------------------------------------
    "auth.no_token": E(401, code="unauthorized"),
    "auth.malformed_token": E(401, code="unauthorized"),
    "auth.unknown_token": E(401, code="unauthorized"),
    "auth.basic_scheme": E(401, code="unauthorized"),
    "auth.token_in_query": E(401, code="unauthorized"),
    "auth.read_cannot_enqueue": E(403, code="forbidden", names="enqueue"),
    "auth.enqueue_cannot_operate": E(403, code="forbidden", names="operate"),
    "auth.work_cannot_read": E(403, code="forbidden", names="read"),
    "auth.read_cannot_claim": E(403, code="forbidden", names="work"),
    "auth.revoked": E(401, code="unauthorized"),
    # a 401 on an operator endpoint is in the audit log (issue 23 8)
    "auth.operate_401": E(401, code="unauthorized"),
    "auth.operate_401_audited": E(True, fix="23.8 edge2"),
    # ---- paths ------------------------------------------------------------------------------
    "paths.dotdot_service": E({400, 404}),
    "paths.encoded_dotdot": E(400, code=BAD),
    "paths.encoded_slash": E(400, code=BAD),
    "paths.bad_task_id": E(400, code=BAD),
    "paths.nul_in_path": E(400, code=BAD),
    "paths.nul_in_query": E(400, code=BAD, names="status", fix="23.8 edge2"),
    "paths.ui_traversal": E({400, 404}, json=False),
    "paths.long_path": E({400, 404, 414}, json=False),
    "paths.unknown": E(404, code="not_found"),
    "paths.method": E(405, code="method_not_allowed"),
    "paths.head_api": E(200, fix="23.8 edge2"),
    "paths.head_healthz": E(200),
    "paths.ui_headers": E(200, json=False),
    # ---- JSON shapes and sizes ------------------------------------------------------------
    "json.nesting_object": E(400, code=BAD),
    "json.nesting_array": E(400, code=BAD),
    "json.not_object": E(400, code=BAD),
    "json.invalid_utf8": E(400, code=BAD),
    "json.unknown_field": E(400, code=BAD, names="colour"),
    "json.wrong_type": E(400, code=BAD, names="priority"),
    "json.over_limit_length": E(413, code="too_large", close=True),
    "json.over_limit_chunked": E(413, code="too_large", close=True),
    "json.batch_too_many": E(400, code=BAD),
    "json.batch_empty": E(400, code=BAD),
    "json.empty_key": E(400, code=BAD, names="data", fix="23.6 edge1"),
    "json.batch_empty_key": E(400, code=BAD, names="tasks[1]", fix="23.6 edge1"),
    "json.trailing_whitespace": E(201),
    # ---- integers ---------------------------------------------------------------------------
    "int.priority_2p64": E(400, code=BAD, names="priority", fix="23.3 edge1"),
    "int.priority_2p63": E(400, code=BAD, names="priority", fix="23.3 edge1"),
    "int.priority_below_int64": E(400, code=BAD, names="priority", fix="23.3 edge1"),
    "int.weight_2p65": E(400, code=BAD, names="weight", fix="23.3 edge1"),
    "int.delay_2p64": E(400, code=BAD, names="delay_ms", fix="23.3 edge1"),
    "int.data_2p64": E(400, code=BAD, names="n", fix="23.3 edge1"),
    "int.claim_max_2p64": E(400, code=BAD, names="max", fix="23.3 edge1"),
    "int.claim_lease_2p64": E(400, code=BAD, names="lease_ms", fix="23.3 edge1"),
    "int.settings_2p64": E(400, code=BAD, names="tick_ms", fix="23.3 edge1"),
    "int.limit_2p64": E(400, code=BAD, names="limit"),
    # ---- duplicate keys ---------------------------------------------------------------------
    "dup.task_field": E(400, code=BAD, names="priority"),
    "dup.data_key": E(400, code=BAD, names="data", close=False, fix="23.7 edge1"),
    "dup.batch_data_key": E(400, code=BAD, names="tasks[1]", fix="23.7 edge1"),
    "dup.settings": E(400, code=BAD, names="tick_ms"),
    "dup.pause_body": E(400, code=BAD, names="kind"),
    "dup.result": E(400, code=BAD, names="result", fix="23.7 edge1"),
    "dup.progress": E(400, code=BAD, names="progress", fix="23.7 edge1"),
    # ---- trailing bytes after the JSON ------------------------------------------------------
    "trail.task": E(400, code=BAD, fix="23.8 edge1"),
    "trail.second_object": E(400, code=BAD, fix="23.8 edge1"),
    "trail.bulk_cancel": E(400, code=BAD, fix="23.8 edge1"),
    # ---- framing (raw sockets) --------------------------------------------------------------
    "frame.two_content_length": E(400, close=True, fix="23.4 edge2"),
    "frame.smuggled_get": E(400, close=True, fix="23.4 edge2"),
    "frame.content_length_plus": E(400, close=True, fix="23.4 edge2"),
    "frame.content_length_negative": E(400, close=True, fix="23.8 edge2"),
    "frame.content_length_junk": E(400, close=True, fix="23.8 edge2"),
    "frame.content_length_huge": E({400, 413}, close=True, fix="23.8 edge2"),
    "frame.cl_and_te": E(400, close=True, fix="23.4 edge2"),
    "frame.bad_request_line": E(400, close=True, fix="23.8 edge2"),
    "frame.headers_over_8k": E(400, close=True, fix="23.8 edge2"),
    "frame.pipelined": E(200, close=False),
    # ---- slow and idle connections ----------------------------------------------------------
    "slow.slowloris": E(True),
    "slow.stalled_body": E(True),
    "idle.flood": E(True),
    # ---- abandoned long-polls ---------------------------------------------------------------
    "poll.abandoned_claims_take_nothing": E(True, fix="23.1 lease"),
    "poll.live_worker_gets_it": E(200, fix="23.1 lease"),
    # ---- lease tokens -----------------------------------------------------------------------
    "lease.guessed_token": E({400, 404, 409}, fix="23.2 lease"),
    "lease.victim_succeeds": E(200, fix="23.2 lease"),
    "lease.history_names_token": E(True, fix="23.2 lease"),
    "lease.forged_token": E({400, 404, 409}),
    "lease.replay_same": E(200),
    "lease.replay_differs": E(409, code="conflict", fix="23.2 lease"),
    "lease.fail_after_succeed": E(409, code="conflict"),
    "lease.kinds": E(True, fix="23.5 edge1"),
    # ---- cookies and one-time codes ---------------------------------------------------------
    "cookie.signin_cross_site": E(403, code="cross_site"),
    "cookie.signin": E(200),
    "cookie.code_reused": E(401, code="unauthorized"),
    "cookie.csrf_no_origin": E(403, code="cross_site"),
    "cookie.csrf_audited": E(True, fix="23.8 edge2"),
    "cookie.csrf_evil_origin": E(403, code="cross_site"),
    "cookie.csrf_cross_site": E(403, code="cross_site"),
    "cookie.get_with_cookie": E(200),
    "cookie.forged": E(401, code="unauthorized"),
    "cookie.token_wins": E(401, code="unauthorized"),
    "cookie.read_link_cannot_operate": E(403, code="forbidden"),
    # ---- page size --------------------------------------------------------------------------
    "page.bounded_by_bytes": E(True, fix="23.8 edge2"),
}
