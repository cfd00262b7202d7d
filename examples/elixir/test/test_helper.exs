# A disc schema in a scratch directory: FRAGHASH_EXAMPLE_MNESIA_DIR when set
# (scripts/test-elixir.sh sets it and removes it afterwards), else a new
# directory under the system's temporary directory, removed after the run.
#
# Mix has already started Mnesia (fraghash's application needs it) with a
# RAM schema; a disc schema can only be created while Mnesia is stopped.
Logger.configure(level: :warning)

dir =
  System.get_env("FRAGHASH_EXAMPLE_MNESIA_DIR") ||
    Path.join(System.tmp_dir!(), "fraghash_example_#{System.unique_integer([:positive])}")

:stopped = :mnesia.stop()
Application.put_env(:mnesia, :dir, String.to_charlist(dir))
:ok = :mnesia.create_schema([node()])
:ok = :mnesia.start()

ExUnit.after_suite(fn _ ->
  :mnesia.stop()
  File.rm_rf!(dir)
end)

ExUnit.start()
