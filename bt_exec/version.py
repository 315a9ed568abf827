"""The installed bt_exec's version, read once: what ``bt_exec.__version__`` and a journal's run header say."""
from importlib.metadata import PackageNotFoundError, version

try:
    VERSION = version("bt_exec")  # the version lives in package.xml, read by setup.py
except PackageNotFoundError:  # running from a source tree that was never installed
    VERSION = "0+unknown"
