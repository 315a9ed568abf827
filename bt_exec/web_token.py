"""The environment variable that holds the web app's bearer token.

Apart from ``bt_exec.web`` so that what only names it (the ROS node's parameter
table, the command line's help) need not import the web server.
"""

TOKEN_ENV = "BT_EXEC_WEB_TOKEN"
