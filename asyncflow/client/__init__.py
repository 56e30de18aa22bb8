"""Client-side tools over a session's results (TF's `tensorflow.python.client`):
`timeline` turns a traced step's StepStats into a Chrome trace."""
