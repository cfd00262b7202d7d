//! Erlang NIF for the fraghash Mnesia adapter (work in progress).
