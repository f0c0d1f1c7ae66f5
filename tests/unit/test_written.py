"""``adapters.kube.written``: a write of a pod or a node counts as seen only once its informer
applied the version it made (an eviction: the pod going), whatever order the answer and the
watch event come in. The case it exists for: a pod written twice in one round, whose first
write is seen before its second."""

from __future__ import annotations

from typing import Any, cast

from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Pod

from graceguard.adapters.kube import view, written


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_patch_is_pending_until_its_version_is_applied() -> None:
    writes = written.Writes()
    write = writes.begin("pod:ns/a")
    assert writes.pending("pod:ns/a")
    writes.answered(write, version="11")
    writes.observed("pod:ns/a", version="10", going=False)  # someone else's, earlier
    assert writes.pending("pod:ns/a")
    writes.observed("pod:ns/a", version="11", going=False)
    assert not writes.pending("pod:ns/a")


def test_the_watch_event_before_the_answer_is_not_missed() -> None:
    writes = written.Writes()
    write = writes.begin("node:n1")
    writes.observed("node:n1", version="7", going=False)
    assert writes.pending("node:n1")  # in flight: its version is not known yet
    writes.answered(write, version="7")
    assert not writes.pending("node:n1")


def test_a_patch_that_changed_nothing_is_seen_in_the_version_shown_as_it_began() -> None:
    """A no-op patch (a round planned from a cache a moment old holds a node the interruption
    queue held already) is answered with the version the object had. The informer applied it
    before the write began, so no event for it comes again, and by the time the round waits
    someone else's patch (kube-controller-manager's) may have replaced it in the cache. The
    version the informer showed as the write began (``shown_by``) says the write is seen;
    without it the round's ``settle`` waited its whole timeout (a 5 s stall in
    ``bench_sqs_to_cordon``)."""
    shown = {"node:n1": "9", "pod:ns/a": "5"}
    writes = written.Writes()
    writes.shown_by(shown.get)
    hold = writes.begin("node:n1")  # the informer shows the queue's patch, version 9
    writes.observed("node:n1", version="10", going=False)  # then kube-controller-manager's
    writes.answered(hold, version="9")  # the hold changed nothing
    assert not writes.pending("node:n1")
    cordon = writes.begin("node:n1")
    writes.answered(cordon, version="11")  # a write that changed something
    assert writes.pending("node:n1")  # until its own version is applied
    writes.observed("node:n1", version="11", going=False)
    assert not writes.pending("node:n1")
    eviction = writes.begin("pod:ns/a", going=True)
    writes.answered(eviction, version="5")
    assert writes.pending("pod:ns/a")  # going: only the pod going counts


def test_the_view_tells_its_writes_the_versions_its_informers_show() -> None:
    """``ClusterView`` wires ``shown_by`` to its informers: a write begun on a node or a pod
    carries the version the cache shows of it then."""
    writes = written.Writes()
    cluster_view = view.ClusterView(cast(Any, None), writes=writes)
    cluster_view.nodes.versions["n1"] = "9"
    cluster_view.pods.versions["ns/a"] = "5"
    assert writes.begin("node:n1").shown == "9"
    assert writes.begin("pod:ns/a").shown == "5"
    assert writes.begin("node:n2").shown is None


def test_a_pod_written_twice_waits_for_the_second_write() -> None:
    writes = written.Writes()
    notice = writes.begin("pod:ns/a")
    writes.answered(notice, version="20")
    eviction = writes.begin("pod:ns/a", going=True)
    writes.answered(eviction, version=None)
    writes.observed("pod:ns/a", version="20", going=False)  # the notice, seen
    assert writes.pending("pod:ns/a")  # the eviction is not: a round now would evict again
    writes.observed("pod:ns/a", version="21", going=True)
    assert not writes.pending("pod:ns/a")


def test_an_eviction_seen_going_before_its_answer_is_done_when_answered() -> None:
    writes = written.Writes()
    eviction = writes.begin("pod:ns/a", going=True)
    writes.observed("pod:ns/a", version="30", going=True)
    assert writes.pending("pod:ns/a")
    writes.answered(eviction, version=None)
    assert not writes.pending("pod:ns/a")


def test_a_failed_write_and_a_write_that_made_nothing_are_not_waited_for() -> None:
    writes = written.Writes()
    writes.failed(writes.begin("pod:ns/a", going=True))  # a refused eviction (429)
    writes.answered(writes.begin("node:n1"), version=None)  # cordoned already: no patch
    assert not writes.pending("pod:ns/a")
    assert not writes.pending("node:n1")


def test_a_deleted_object_leaves_nothing_to_wait_for() -> None:
    writes = written.Writes()
    writes.answered(writes.begin("pod:ns/a"), version="40")
    writes.observed("pod:ns/a", version="39", going=False, gone=True)
    assert not writes.pending("pod:ns/a")


def test_a_relist_settles_only_the_writes_answered_before_it_began() -> None:
    clock = Clock()
    writes = written.Writes(clock=clock)
    early = writes.begin("pod:ns/a")
    writes.answered(early, version="50")
    clock.now = 1.0
    began = writes.now()
    clock.now = 2.0
    late = writes.begin("pod:ns/b")
    writes.answered(late, version="60")
    other_kind = writes.begin("node:n1")
    writes.answered(other_kind, version="61")
    writes.relisted("pod", began=began)
    assert not writes.pending("pod:ns/a")
    assert writes.pending("pod:ns/b")  # answered after the list began: maybe not in it
    assert writes.pending("node:n1")


def test_a_write_never_seen_is_forgotten_after_a_while() -> None:
    clock = Clock()
    writes = written.Writes(clock=clock)
    writes.answered(writes.begin("pod:ns/a"), version="70")
    clock.now = written.FORGET_SECONDS - 1
    assert writes.pending("pod:ns/a")
    clock.now = written.FORGET_SECONDS
    assert not writes.pending("pod:ns/a")


def test_versions_are_read_from_lightkube_objects_and_documents() -> None:
    assert written.version_of(Pod(metadata=ObjectMeta(resourceVersion="5"))) == "5"
    assert written.version_of({"metadata": {"resourceVersion": "6"}}) == "6"
    assert written.version_of({"kind": "Status"}) is None
    assert written.version_of(None) is None
