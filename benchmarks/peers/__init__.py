"""Side-by-side benchmark of fleetsched and the job queues operators know (issue 16)."""
