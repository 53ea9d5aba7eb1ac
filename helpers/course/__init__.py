"""The course's plumbing: settings, the lessons' records, the cluster, hardware, results, display."""
