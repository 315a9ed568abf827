"""bt_exec in a Robonix deployment: the executor's gRPC contracts, Atlas, and capability calls over MCP.

robonix-executor's defaults, which ``bt-exec robonix`` keeps (its command and its parts import them from here, so
importing them loads no gRPC).
"""

DEFAULT_ATLAS = "127.0.0.1:50051"
# robonix-executor's config.rs listens here; its README says 127.0.0.1:50072 (docs/robonix.md says which holds).
DEFAULT_LISTEN = "127.0.0.1:50061"
DEFAULT_PROVIDER_ID = "executor"
