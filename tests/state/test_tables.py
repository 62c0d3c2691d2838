"""state.tables' RecordCache: a record is decoded once per revision of its key, and what the
netmaster committed is read back without decoding — never a value the store no longer holds."""

from __future__ import annotations

from dataclasses import replace

from contivd.state import TagsState, tables
from raftstore import MemoryStore

TAGS = TagsState("AA==", "AA==", "AA==", "AA==")


async def test_a_record_is_decoded_once_per_revision() -> None:
    store = MemoryStore()
    cache = tables.RecordCache()
    assert cache.read(store, tables.TAGS) == (None, 0) and store.mod_revision_nowait(tables.TAGS.key("")) == 0
    revision = await store.put(tables.TAGS.key(""), TAGS.to_json())
    first, at = cache.read(store, tables.TAGS)
    assert first == TAGS and at == revision == store.mod_revision_nowait(tables.TAGS.key(""))
    assert cache.read(store, tables.TAGS)[0] is first, "unchanged: the decoded record is reused"
    changed = replace(TAGS, vlan="AQ==")
    await store.put(tables.TAGS.key(""), changed.to_json())
    assert cache.read(store, tables.TAGS)[0] == changed, "the key moved on: decoded again"
    await store.delete(tables.TAGS.key(""))
    assert cache.read(store, tables.TAGS) == (None, 0)


async def test_committed_records_are_read_back_only_at_their_revision() -> None:
    store = MemoryStore()
    cache = tables.RecordCache()
    written = replace(TAGS, epg_id="Ag==")
    revision = await store.put(tables.TAGS.key(""), written.to_json())
    cache.committed([(tables.TAGS.key(""), written)], revision)
    assert cache.read(store, tables.TAGS)[0] is written
    other = replace(TAGS, epg_id="Aw==")
    await store.put(tables.TAGS.key(""), other.to_json())  # another writer (an earlier leader, import-contiv)
    assert cache.read(store, tables.TAGS)[0] == other
