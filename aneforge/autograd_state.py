"""Whether new ops record gradient information (see `no_grad`)."""
enabled = [True]
