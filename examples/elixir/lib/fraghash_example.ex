defmodule FraghashExample do
  @moduledoc """
  A fragmented Mnesia table whose keys are placed by fraghash's
  `:mnesia_frag_slots`, used through plain `:mnesia` calls.

  Records are `{table, key, value}`. Every read and write goes through
  `:mnesia.activity(kind, fun, [], :mnesia_frag)`, which sends each key to
  its fragment; a plain `:mnesia.transaction/1` would only see the first
  fragment.
  """

  @doc """
  Creates `table` with `n` fragments, each a `disc_copies` table on this
  node. Needs a disc schema (`:mnesia.create_schema/1`).
  """
  def create_table(table, n) do
    :mnesia.create_table(table,
      attributes: [:key, :value],
      frag_properties: [
        n_fragments: n,
        node_pool: [node()],
        n_disc_copies: 1,
        hash_module: :mnesia_frag_slots
      ]
    )
  end

  @doc "Writes `{key, value}` pairs in one transaction."
  def put_all(table, pairs) do
    frag(:transaction, fn ->
      Enum.each(pairs, fn {key, value} -> :mnesia.write({table, key, value}) end)
    end)
  end

  @doc "The records of `key` (`[]` or `[{table, key, value}]`)."
  def get(table, key), do: frag(:transaction, fn -> :mnesia.read(table, key) end)

  @doc """
  Adds one fragment on `nodes`, moving the keys the new fragment takes.
  `:fraghash_frag.add_frag/2` rather than
  `:mnesia.change_table_frag(table, {:add_frag, nodes})`: it also makes the
  moves durable on disc.
  """
  def grow(table, nodes \\ [node()]), do: :fraghash_frag.add_frag(table, nodes)

  @doc "The names of `table`'s fragments, first to last."
  def fragments(table), do: frag(:async_dirty, fn -> :mnesia.table_info(table, :frag_names) end)

  @doc "Waits until every fragment is loaded (after Mnesia starts)."
  def wait(table, timeout), do: :mnesia.wait_for_tables(fragments(table), timeout)

  @doc "The number of records in each fragment, first to last."
  def sizes(table), do: for(f <- fragments(table), do: :mnesia.table_info(f, :size))

  defp frag(kind, fun), do: :mnesia.activity(kind, fun, [], :mnesia_frag)
end
