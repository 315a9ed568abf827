"""Motion: the policy every planned trajectory passes before execution, and the skills that move the arm."""
