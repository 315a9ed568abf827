"""Terminal views of plans: ``render`` turns a plan's tree view into lines, ``screen`` draws frames,
``run_view`` follows a plan of this process's executor (``bt-exec run``), ``watch`` one of a running
app over HTTP (``bt-exec watch``)."""
