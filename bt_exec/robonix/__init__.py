"""bt_exec in a Robonix deployment: the executor's gRPC contracts, Atlas, and capability calls over MCP."""
