"""MIL side exits: text (and later protobuf and .mlpackage)."""
