"""Reading what others wrote: receipts, seamscope traces, PyTorch's ``TORCH_TRACE`` logs.

Nothing under ``ingest`` imports torch."""
