"""Links between a plan's behaviours that never form a reference cycle."""
from __future__ import annotations

from weakref import ref


class AcyclicLinks:
    """Mixin of every behaviour bt_exec builds: a tree of them holds its nodes only downwards.

    py_trees links a child to its parent (``parent``) and keeps in each behaviour a
    generator of its own ``tick`` (``iterator``, made anew on every ``stop`` and never
    read): both are reference cycles, so a released plan's tree would wait for a full
    run of the cyclic garbage collector, which a long-lived executor may not see for
    hundreds of plans. Here ``parent`` is held weakly (a tree viewer holding the root
    still walks it both ways) and ``iterator`` is not kept, so a tree nobody holds is
    freed at once by reference counting.
    """

    _parent_link: ref | None = None

    @property
    def parent(self):
        link = self._parent_link
        return None if link is None else link()

    @parent.setter
    def parent(self, node) -> None:
        self._parent_link = None if node is None else ref(node)

    @property
    def iterator(self) -> None:
        return None

    @iterator.setter
    def iterator(self, _generator) -> None:
        """py_trees sets it as a behaviour is made and stopped; dropped here, it holds no cycle."""
