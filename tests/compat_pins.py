"""What the tests of bt_exec/compat hold each library to: the version its overrides were written against, and the
internals they override, still there (imported by name by tests/test_compat.py and tests/ros/test_compat_rclpy.py)."""
import importlib.metadata
import inspect


def assert_written_for(library: str, overrides) -> None:
    """The installed ``library`` is the version ``overrides`` (a bt_exec.compat module) was written against."""
    installed = importlib.metadata.version(library)
    assert installed == overrides.WRITTEN_FOR, (
        f"{library} {installed} is installed, but {overrides.__name__} overrides the internals of {library} "
        f"{overrides.WRITTEN_FOR}: " + "; ".join(f"{name} ({what})" for name, what in overrides.OVERRIDES.items())
        + f". Check each against {library} {installed}, then set WRITTEN_FOR to it.")


def assert_internals(cls: type, override: str, methods=(), attributes=()) -> None:
    """``cls`` (the library's class that ``override`` subclasses or stands in for) still has ``methods``, and its
    ``__init__`` still sets ``attributes`` on the instance: what the override replaces or reads."""
    missing = [name for name in methods if not callable(getattr(cls, name, None))]
    source = inspect.getsource(cls.__init__)
    missing += [name for name in attributes if f"self.{name} =" not in source and f"self.{name}:" not in source]
    assert not missing, (f"{cls.__module__}.{cls.__qualname__} no longer has {', '.join(missing)}, which {override} "
                         "overrides or reads: look at the override again")
