"""The cluster as the drain planner fills it: what is free on each node, who runs there, and
where kube-scheduler would put a Pod. Pure.

A node's Pods are placed the way the compaction scheduler would place them (MostAllocated on
requests), within what each destination holds already, the Pods planned onto it included.
Built for speed: a move keeps an undo log instead of copying the cluster, resources are
compared in place, each pool's destinations stay sorted MostAllocated first from one move to
the next instead of being sorted for each, and a Pod with no placement constraints takes the
first of them that fits (for nodes of one shape that is the node kube-scheduler would score
highest), so that a move reads only the head of that order.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Collection, Iterable, Mapping, Sequence

from compaction.quantity import format_milli
from compaction.safety import is_placeholder
from compaction.selector import LabelSelector
from controller.drain_planner.reasons import Code, Reason
from controller.drain_planner.scoring import (
    book,
    choice,
    most_allocated_score,
    scheduler_key,
)
from controller.drain_planner.sim_node import (
    SimNode,
    admits,
    fits,
    holds,
    index_in,
    keeps_in_use,
    largest_first,
    leaving,
    needs_of,
    promote,
    rank,
    shape,
)
from controller.drain_planner.taint import drain_owner
from controller.snapshot.constraints import Effect, tolerated
from controller.snapshot.node import NodeInfo
from controller.snapshot.pod import PodInfo


class Cluster:
    """Nodes with what they hold, and the Pods planned onto them so far.

    Built for speed (see the module's docstring): the destinations of a pool are one list
    kept in order across moves (``_destinations_in``).
    """

    def __init__(self, nodes: Iterable[NodeInfo], pods: Iterable[PodInfo]) -> None:
        self.nodes: dict[str, SimNode] = {}
        for n in nodes:
            self.nodes[n.name] = SimNode(
                n, dict(n.allocatable), [],
                open=(n.ready and not n.unschedulable and not leaving(n)
                      and drain_owner(n) is None),
                hard_taints=tolerated(n.taints, ()) is not None,
                soft_taints=any(t.effect == Effect.PREFER_NO_SCHEDULE for t in n.taints))
        pending: list[PodInfo] = []
        # What every bound Pod needs at least, per resource (the keys of the first one
        # suffice: a resource another lacks has a minimum of 0). Every Pod a move places is
        # one of these, so a node short of it takes no Pod at all.
        least: dict[str, int] | None = None
        for pod in pods:
            node = self.nodes.get(pod.node_name)
            if node is not None and pod.occupies:
                # A Terminating Pod holds its room until it is gone, for kube-scheduler too;
                # a StatefulSet's is recreated under its name only then, so its replacement's
                # room is spoken for now as well.
                if pod.deleting and pod.owner is not None and pod.owner[0] == "StatefulSet":
                    pending.append(pod)
                needs = needs_of(pod)
                self.add(node, pod, needs)
                if least is None:
                    least = dict(needs)
                else:
                    for r, amount in least.items():
                        if (other := needs.get(r, 0)) < amount:
                            least[r] = other
            elif pod.unbound:
                pending.append(pod)
        for node in self.nodes.values():
            node.rescore()  # once per node, not once per Pod
        self._least = [(r, a) for r, a in (least or {}).items() if a > 0]
        self.emptied: set[str] = set()
        # The nodes emptied, by shape and taints, most allocated first: alike but for that.
        self._emptied_by: dict[tuple[object, ...], list[SimNode]] = {}
        self.received: set[str] = set()  # destinations of planned Pods: no longer candidates
        self.moves: dict[tuple[str, str], str] = {}
        self._pools: dict[LabelSelector, list[SimNode]] = {}
        # Per pool, the nodes that may take a Pod (``_receives``), most allocated first, and
        # per node the lists that hold it when it may. Built on a pool's first move and kept
        # current from then on by every change to what a node holds, is emptied or receives
        # (``_put``, ``_undo``, ``empty``): always equal to sorting them afresh.
        self._destinations: dict[LabelSelector, list[SimNode]] = {}
        self._lists_of: dict[str, list[list[SimNode]]] = {}
        self._reserve(pending)
        # Each node's room and scored requests before any move: what it offers a drain's Pod
        # while the plan has not yet emptied it (``attraction``).
        self.initial = {name: (dict(n.free), n.scored) for name, n in self.nodes.items()}
        # Nodes the plan counts as free (only DaemonSet, mirror or placeholder Pods), which no
        # move fills, by shape and taints, most allocated first: the first that admits a Pod
        # is the one of its group the scheduler ranks highest.
        free: dict[tuple[object, ...], list[SimNode]] = {}
        for sim in self.nodes.values():
            if sim.open and not sim.hosts:
                free.setdefault(shape(sim), []).append(sim)
        self._free = [sorted(group, key=lambda s: (-most_allocated_score(
            s.scored, s.info.allocatable), s.info.name)) for group in free.values()]

    def _reserve(self, pending: Sequence[PodInfo]) -> None:
        """Pods not yet scheduled (an evicted Pod's replacement, say, or the one a Terminating
        StatefulSet Pod will get) take room on the node
        the scheduler would give them before anything else is planned: otherwise a pass that
        runs while they wait drains a node into room that is already spoken for. Their
        destination is no candidate meanwhile; they are nobody's to evict."""
        ordered = sorted((n for n in self.nodes.values() if n.open), key=rank)
        for pod in sorted(pending, key=largest_first):
            needs = needs_of(pod)
            # A replacement yet to come takes no room where its predecessor still holds it.
            target = self.place(pod, needs, ordered, self.nodes.get(pod.node_name))
            if target is None:
                continue  # it stays Pending in the cluster too
            book(target, pod, needs, 1)
            target.rescore()
            target.hosts += keeps_in_use(pod)
            self.received.add(target.info.name)
            promote(ordered, target)

    @staticmethod
    def add(node: SimNode, pod: PodInfo, needs: Mapping[str, int]) -> None:
        """Put ``pod`` on ``node``; its rank is the caller's to renew (``rescore``): once for
        all its Pods when the cluster is read, after each Pod a move places."""
        book(node, pod, needs, 1)
        node.pods.append(pod)
        if pod.constraints.anti_affinity:
            node.repels += 1
        node.hosts += keeps_in_use(pod)

    @staticmethod
    def take(node: SimNode, pod: PodInfo, needs: Mapping[str, int]) -> None:
        book(node, pod, needs, -1)
        node.rescore()
        node.pods.remove(pod)
        if pod.constraints.anti_affinity:
            node.repels -= 1
        node.hosts -= keeps_in_use(pod)

    def destinations(self, exclude: str, pool: LabelSelector) -> list[SimNode]:
        """Where the Pods of ``exclude`` may go: the pool's other nodes in use, ready,
        schedulable, not leaving, not draining and not emptied by this simulation. A node
        running nothing but DaemonSet Pods and placeholders is free already (the autoscaler's
        to remove): a drain into it frees nothing, and the next plan would drain it back."""
        members = self.in_pool(pool)
        return [n for n in members if n.open and n.hosts and n.info.name != exclude
                and n.info.name not in self.emptied]

    def in_pool(self, pool: LabelSelector) -> list[SimNode]:
        """The nodes ``pool`` selects, matched once per pool (labels do not change in a
        plan), in name order."""
        if pool not in self._pools:
            self._pools[pool] = [n for n in self.nodes.values() if pool.matches(n.info.labels)]
        return self._pools[pool]

    fits = staticmethod(fits)

    # The node the compaction scheduler would pick (``scoring.choice``).
    place = staticmethod(choice)

    def _rival(self, pod: PodInfo, needs: Mapping[str, int], target: SimNode,
               source: SimNode) -> SimNode | None:
        """A node the plan counts as free (one no Pod keeps in use, one it empties, or the
        Pod's own) that the compaction scheduler would rank at least as high as ``target``
        for ``pod``: a tie is a coin toss. None when ``target`` is its choice."""
        if is_placeholder(pod.priority):
            return None  # preempted where it stands, never evicted: it lands nowhere
        if not (self._free or target.soft_taints):
            return None  # no free node, and the target outranks every node being emptied
        key = scheduler_key(target, pod)
        for group in self._free:
            node = next((n for n in group if self.fits(pod, needs, n)), None)
            if node is not None and scheduler_key(node, pod) <= key:
                return node
        if key[0] == 0:
            # A node the plan empties carries the drain taint, which the Pod does not
            # tolerate (one that does never moves): a target without a soft taint the Pod
            # minds outranks every such node, its own included. Only then are they read.
            return None
        firsts = (next((n for n in g if n is not target and self.fits(pod, needs, n)), None)
                  for g in self._emptied_by.values())
        for node in (*firsts, source):
            if node is None:
                continue
            if scheduler_key(node, pod, int(drain_owner(node.info) is None),
                             leaving_pod=node is source) <= key:
                return node
        return None

    def shortfall(self, pod: PodInfo, exclude: str, pool: LabelSelector) -> str:
        """Why ``pod`` fits no destination, for a person: the first resource short everywhere
        it could go, or its constraints."""
        admitting = [n for n in self.destinations(exclude, pool) if admits(pod, n)]
        if not admitting:
            return "no other node in use admits it (pool, nodeSelector, affinity or taints)"
        for resource, amount in sorted(needs_of(pod).items()):
            if amount > 0 and all(n.free.get(resource, 0) < amount for n in admitting):
                return "room for 1 more Pod" if resource == "pods" else \
                    f"{resource} {format_milli(resource, amount)}"
        if pod.constraints.anti_affinity or any(n.repels for n in admitting):
            return "required anti-affinity on the hostname"
        return "no node has room for all it requests at once"

    def move(self, pods: Sequence[tuple[PodInfo, LabelSelector]], source: str,
             unread: Collection[tuple[str, str]] = ()) -> Reason | None:
        """Place every Pod of ``source`` elsewhere, each within its own pool (the nodes its
        policy's descheduler judges fit), or none: the reason it failed, or None.

        ``unread``: the Pods whose replacements another scheduler places (the default one,
        or an external one), whose configuration the API does not show: each moves only where
        that scheduler has no choice, to the one node that admits it."""
        wanted = [needs_of(p) for p, _ in pods]
        # By identity: a policy's Pods share its pool, and hashing a selector per Pod costs
        # more than placing the Pod.
        orders: dict[int, list[SimNode]] = {}
        for _, pool in pods:
            if id(pool) not in orders:
                orders[id(pool)] = self._destinations_in(pool)
        skip = self.nodes[source]
        placed: list[tuple[SimNode, PodInfo, dict[str, int]]] = []
        for (pod, pool), needs in sorted(zip(pods, wanted, strict=True),
                                         key=lambda pn: largest_first(pn[0][0])):
            if pod.key in unread:
                target, choices = self._only_choice(pod, needs, skip, orders[id(pool)])
                if target is None:
                    self._undo(placed)
                    return Reason(Code.UNCERTAIN_DESTINATION, (
                        f"pod {pod.namespace}/{pod.name} is placed by a scheduler the plan "
                        "cannot read, and " + (
                            "the one node that admits it is no destination" if choices == 1
                            else f"{choices} nodes admit it")))
                self._put(target, pod, needs)
                placed.append((target, pod, needs))
                continue
            target = self.place(pod, needs, orders[id(pool)], skip)
            if target is None:
                # Judged before the undo: the room its siblings took is what it lacks.
                reason = Reason(Code.DOES_NOT_FIT, f"pod {pod.namespace}/{pod.name} does not "
                                f"fit elsewhere: {self.shortfall(pod, source, pool)}")
                self._undo(placed)
                return reason
            if (rival := self._rival(pod, needs, target, skip)) is not None:
                self._undo(placed)
                return Reason(Code.ATTRACTED, (
                    f"pod {pod.namespace}/{pod.name} would go to node {rival.info.name}, "
                    f"which the plan counts as free, not to {target.info.name}: the "
                    "compaction scheduler ranks it at least as high"))
            self._put(target, pod, needs)
            placed.append((target, pod, needs))
        for node, pod, _ in placed:
            self.received.add(node.info.name)
            self.moves[pod.key] = node.info.name
        self.empty(source)
        return None

    def _only_choice(self, pod: PodInfo, needs: Mapping[str, int], source: SimNode,
                     destinations: Sequence[SimNode]) -> tuple[SimNode | None, int]:
        """The one node any scheduler must give ``pod``, and how many admit it: every node
        that takes Pods counts (empty ones, other pools', drain-tainted ones: a soft taint
        only weighs), and the one must be a destination of its pool."""
        admitting = [n for n in self.nodes.values()
                     if n is not source and n.info.name not in self.emptied and n.info.ready
                     and not n.info.unschedulable and not leaving(n.info)
                     and self.fits(pod, needs, n)]
        if len(admitting) == 1 and any(n is admitting[0] for n in destinations):
            return admitting[0], 1
        return None, len(admitting)

    def nowhere_else(self, pod: PodInfo, source: str) -> bool:
        """No other node that takes Pods admits ``pod`` (its selectors, affinity and taints),
        whatever their room."""
        return not any(n.open and n.info.name != source and admits(pod, n)
                       for n in self.nodes.values())

    def keep(self, name: str) -> None:
        """The plan cannot free ``name``, though no Pod keeps it in use (placeholders that fit
        nowhere else): it stays in use after all, so it is no longer counted as free, and it
        takes Pods like any node in use."""
        node = self.nodes[name]
        if node.hosts or name in self.emptied:
            return
        self._free = [kept for group in self._free if (kept := [n for n in group
                                                                if n is not node])]
        node.hosts += 1  # its placeholders, which stay
        if self._receives(node):
            for ordered in self._lists_of.get(name, ()):
                insort(ordered, node, key=rank)

    def empty(self, name: str) -> None:
        node = self.nodes[name]  # emptied by the simulation: it takes no Pod any more
        if name not in self.emptied:
            if self._receives(node):
                self._unlist(node)
            self.emptied.add(name)
            insort(self._emptied_by.setdefault(shape(node), []), node, key=rank)

    def _receives(self, node: SimNode) -> bool:
        """Whether ``node`` is a destination (``destinations``, whatever the source) with
        room for the least a Pod needs (``_least``); the nodes ``_destinations_in`` lists."""
        return bool(node.open and node.hosts and node.info.name not in self.emptied
                    and holds(node, self._least))

    def _destinations_in(self, pool: LabelSelector) -> list[SimNode]:
        """The nodes of ``pool`` that may take a Pod, most allocated first: for a given
        source, its ``destinations`` but those with no room for any Pod, in ``rank`` order.
        Sorted once per pool and kept so by every change after (see ``__init__``)."""
        ordered = self._destinations.get(pool)
        if ordered is None:
            members = self.in_pool(pool)
            ordered = sorted((n for n in members if self._receives(n)), key=rank)
            self._destinations[pool] = ordered
            for n in members:
                self._lists_of.setdefault(n.info.name, []).append(ordered)
        return ordered

    def _put(self, target: SimNode, pod: PodInfo, needs: Mapping[str, int]) -> None:
        """Put ``pod`` on ``target``, a listed destination, and keep its lists in order: its
        rank rose, or it has no room left for any Pod and leaves them. It is found in them
        before its rank changes: their order is that rank's."""
        lists = self._lists_of.get(target.info.name, ())
        at = [index_in(ordered, target) for ordered in lists]
        before = target.rank
        self.add(target, pod, needs)
        target.rescore()
        if not holds(target, self._least):
            for ordered, i in zip(lists, at, strict=True):
                del ordered[i]
        elif target.rank != before:
            for ordered, i in zip(lists, at, strict=True):
                del ordered[i]
                insort(ordered, target, key=rank)

    def _undo(self, placed: Sequence[tuple[SimNode, PodInfo, dict[str, int]]]) -> None:
        """Take back a failed move's Pods: the nodes they went to leave their lists at their
        rank of now and return at the one they had before, if they take Pods again."""
        touched = list({id(node): node for node, _, _ in placed}.values())
        for node in touched:
            if self._receives(node):
                self._unlist(node)
        for node, pod, needs in reversed(placed):
            self.take(node, pod, needs)
        for node in touched:
            if self._receives(node):
                for ordered in self._lists_of.get(node.info.name, ()):
                    insort(ordered, node, key=rank)

    def _unlist(self, node: SimNode) -> None:
        for ordered in self._lists_of.get(node.info.name, ()):
            del ordered[index_in(ordered, node)]
