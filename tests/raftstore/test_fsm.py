"""The state machine is pure: every rule is checked here without Raft, sockets or threads."""

from __future__ import annotations

import json
import pickle

from raftstore import Delete, DeletePrefix, Put, absent, mod_revision_is, value_is
from raftstore._commands import encode, txn_command
from raftstore._fsm import StateMachine


def apply_txn(fsm: StateMachine, compares=(), success=(), failure=()) -> dict:
    return fsm.apply(encode(txn_command(compares, success, failure)))


def value(fsm: StateMachine, key: str):
    found = fsm.get(key)
    return None if found is None else json.loads(found[1].value)


def test_put_tracks_etcd_style_revisions() -> None:
    fsm = StateMachine()
    apply_txn(fsm, success=[Put("/a", 1)])
    apply_txn(fsm, success=[Put("/b", 2)])
    result = apply_txn(fsm, success=[Put("/a", 3)])
    entry = fsm.get("/a")[1]
    assert (entry.create_revision, entry.mod_revision, entry.version) == (1, 3, 2)
    assert result == {"succeeded": True, "revision": 3, "results": [1]}


def test_txn_runs_one_branch_atomically_at_one_revision() -> None:
    fsm = StateMachine()
    apply_txn(fsm, success=[Put("/ipam/net1", "bits-v1")])
    ok = apply_txn(fsm, [mod_revision_is("/ipam/net1", 1)], [Put("/ipam/net1", "bits-v2"), Put("/ep/1", {"ip": "198.18.0.2"})])
    assert ok["succeeded"] and ok["revision"] == 2
    assert fsm.get("/ep/1")[1].mod_revision == fsm.get("/ipam/net1")[1].mod_revision == 2
    stale = apply_txn(fsm, [mod_revision_is("/ipam/net1", 1)], [Put("/ep/2", {})], [Put("/conflicts", 1)])
    assert not stale["succeeded"]
    assert fsm.get("/ep/2") is None and value(fsm, "/conflicts") == 1


def test_compares() -> None:
    fsm = StateMachine()
    assert apply_txn(fsm, [absent("/x")], [Put("/x", {"v": [1, 2]})])["succeeded"]
    assert not apply_txn(fsm, [absent("/x")], [Put("/x", 0)])["succeeded"]
    assert apply_txn(fsm, [value_is("/x", {"v": [1, 2]})], [Put("/y", 1)])["succeeded"]
    assert not apply_txn(fsm, [value_is("/x", {"v": [2, 1]})], [Put("/y", 2)])["succeeded"]
    assert apply_txn(fsm, [mod_revision_is("/nope", 0)], [])["succeeded"]


def test_unchanged_state_keeps_the_revision() -> None:
    fsm = StateMachine()
    apply_txn(fsm, success=[Put("/a", 1)])
    result = apply_txn(fsm, [absent("/a")], [Put("/a", 2)], [])
    assert result == {"succeeded": False, "revision": 1, "results": []}
    assert apply_txn(fsm, success=[Delete("/missing")])["revision"] == 1


def test_delete_prefix_and_range_are_prefix_exact() -> None:
    fsm = StateMachine()
    apply_txn(fsm, success=[Put("/n/a", 1), Put("/n/b", 2), Put("/nx", 3)])
    assert [k for k, _ in fsm.range("/n/")] == ["/n/a", "/n/b"]
    result = apply_txn(fsm, success=[DeletePrefix("/n/")])
    assert result["results"] == [2] and [k for k, _ in fsm.range("/")] == ["/nx"]


def test_keys_lists_what_range_lists_without_the_values() -> None:
    fsm = StateMachine()
    apply_txn(fsm, success=[Put(key, 1) for key in ("/n/a", "/n/b", "/n/b/c", "/n0", "/nx", "/m", "/o~", "/o~~")])
    for prefix in ("/", "/n", "/n/", "/n/b", "/nx", "/o~", "/p", "/m/"):
        assert fsm.keys(prefix) == [k for k, _ in fsm.range(prefix)], prefix


def test_lease_revoke_deletes_its_keys_and_expiry_loses_to_keepalive() -> None:
    fsm = StateMachine()
    lease = fsm.apply(encode({"op": "lease_grant", "ttl": 10, "now": 100.0}))["lease"]
    apply_txn(fsm, success=[Put("/nodes/n1", {"ip": "198.18.0.1"}, lease), Put("/keep", 1)])
    assert fsm.expired_leases(now=105.0, leader_since=0.0) == []
    assert fsm.expired_leases(now=111.0, leader_since=0.0) == [(lease, 110.0)]
    assert fsm.expired_leases(now=111.0, leader_since=105.0) == [], "a new leader waits one ttl"
    fsm.apply(encode({"op": "lease_keepalive", "id": lease, "now": 108.0}))
    stale = fsm.apply(encode({"op": "lease_revoke", "id": lease, "expires_at": 110.0}))
    assert stale["revoked"] is False and value(fsm, "/nodes/n1") is not None
    revoked = fsm.apply(encode({"op": "lease_revoke", "id": lease, "expires_at": 118.0}))
    assert revoked["revoked"] is True
    assert fsm.get("/nodes/n1") is None and value(fsm, "/keep") == 1
    assert fsm.apply(encode({"op": "lease_keepalive", "id": lease, "now": 1.0}))["error"] == "lease_not_found"


def test_put_with_unknown_lease_writes_nothing() -> None:
    fsm = StateMachine()
    result = apply_txn(fsm, success=[Put("/a", 1), Put("/b", 2, lease=42)])
    assert result["error"] == "lease_not_found"
    assert fsm.get("/a") is None and fsm.revision == 0


def test_history_serves_watches_until_compacted() -> None:
    fsm = StateMachine(history_limit=3)
    for i in range(3):
        apply_txn(fsm, success=[Put(f"/w/{i}", i)])
    assert [r[2] for r in fsm.events_since(2, "/w/")] == ["/w/1", "/w/2"]
    apply_txn(fsm, success=[Delete("/w/0")])
    assert fsm.events_since(1, "/w/") is None, "revision 1 fell out of the history"
    (record,) = fsm.events_since(4, "/")
    assert record[:3] == (4, "delete", "/w/0") and json.loads(record[3]) == 0 and record[4] is None


def test_request_ids_make_retries_exactly_once() -> None:
    fsm = StateMachine()
    text = encode(txn_command([], [Put("/counter", 1)], []))
    first, again = fsm.apply(text), fsm.apply(text)
    assert first == again and fsm.revision == 1


def test_bad_commands_are_refused_without_effect() -> None:
    fsm = StateMachine()
    assert fsm.apply("not json")["error"] == "bad_command"
    assert fsm.apply(json.dumps({"v": 99, "op": "txn"}))["error"] == "bad_command"
    assert fsm.apply(encode({"op": "rm -rf"}))["error"] == "bad_command"
    assert fsm.revision == 0


def test_snapshot_round_trip_restores_everything() -> None:
    fsm = StateMachine(history_limit=5)
    lease = fsm.apply(encode({"op": "lease_grant", "ttl": 5, "now": 0.0}))["lease"]
    apply_txn(fsm, success=[Put("/a", {"x": 1}, lease), Put("/b", [1])])
    apply_txn(fsm, success=[Delete("/b")])
    restored = pickle.loads(pickle.dumps(fsm))
    assert [(k, e.__getstate__()) for k, e in restored.range("/")] == [(k, e.__getstate__()) for k, e in fsm.range("/")]
    assert restored.revision == fsm.revision and restored.events_since(1, "/") == fsm.events_since(1, "/")
    restored.apply(encode({"op": "lease_revoke", "id": lease}))
    assert restored.get("/a") is None and fsm.get("/a") is not None


def test_a_batch_entry_applies_each_command_in_order() -> None:
    from raftstore._commands import encode_batch

    fsm = StateMachine()
    first = encode(txn_command([absent("/lock")], [Put("/lock", "a")], []))
    second = encode(txn_command([absent("/lock")], [Put("/lock", "b")], []))
    results = fsm.apply(encode_batch([first, second]))
    assert [r["succeeded"] for r in results] == [True, False]
    assert value(fsm, "/lock") == "a" and fsm.revision == 1


def _busy_voter() -> StateMachine:
    voter = StateMachine()
    lease = voter.apply(encode({"op": "lease_grant", "rid": "g", "ttl": 10, "now": 0.0}))["lease"]
    for i in range(30):
        apply_txn(voter, success=[Put(f"/k/{i % 7}", {"i": i}), Put(f"/other/{i % 3}", i)])
        if i % 5 == 0:
            apply_txn(voter, success=[Delete(f"/k/{(i + 1) % 7}")])
        if i == 12:
            apply_txn(voter, success=[Put("/leased/a", 1, lease), Put("/leased/b", 2, lease)])
        if i == 20:
            voter.apply(encode({"op": "lease_revoke", "rid": "r", "id": lease}))
        if i == 25:
            apply_txn(voter, success=[DeletePrefix("/other/")])
    return voter


def test_a_follower_applying_the_changes_holds_the_voters_keys_at_every_revision() -> None:
    voter = _busy_voter()
    changes = voter.changes_since(1)
    assert changes is not None
    follower = StateMachine()
    for start in range(0, len(changes), 4):  # batches that split nothing: whole revisions
        chunk = [c for c in changes if c[0] in {c[0] for c in changes[start : start + 4]}]
        follower.apply_changes(chunk)  # overlaps with what it holds are skipped
    mirror, image = follower.export_image(), voter.export_image()
    assert (mirror.revision, mirror.keys) == (image.revision, image.keys)
    assert follower.events_since(1, "/k/") == voter.events_since(1, "/k/"), "its own watches see what the voter's see"


def test_a_follower_refuses_a_gap_and_skips_what_it_holds() -> None:
    voter = _busy_voter()
    changes = voter.changes_since(1)
    assert changes is not None
    follower = StateMachine()
    assert follower.apply_changes([c for c in changes if c[0] <= 3]) == 3
    assert follower.apply_changes([c for c in changes if c[0] <= 3]) == 0, "held: skipped"
    try:
        follower.apply_changes([c for c in changes if c[0] >= 5])
    except ValueError as exc:
        assert "does not follow revision 3" in str(exc)
    else:
        raise AssertionError("a gap was applied")
    assert follower.revision == 3


def test_history_without_key_revisions_from_an_older_snapshot_still_serves_watches_but_not_followers() -> None:
    voter = _busy_voter()
    old = pickle.loads(pickle.dumps(voter))
    old._history = type(old._history)([r[:5] for r in old._history], maxlen=old._history.maxlen)  # as pickled before
    assert old.events_since(1, "/k/") == [r[:5] for r in voter.events_since(1, "/k/")]
    assert old.changes_since(1) is None, "a follower gets an image instead"
