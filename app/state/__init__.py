"""What the app knows, without Qt: the run monitor, bounded series buffers, the rules that block Run,
numbers as the app writes them. Unit-tested without a window."""
