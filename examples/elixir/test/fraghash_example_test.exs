defmodule FraghashExampleTest do
  use ExUnit.Case

  @records 2000

  test "a fragmented disc_copies table keeps every record through growing and a restart" do
    assert {:atomic, :ok} = FraghashExample.create_table(:item, 4)
    assert :mnesia.table_info(:item, :storage_type) == :disc_copies
    assert :ok = FraghashExample.put_all(:item, for(k <- 1..@records, do: {k, k * k}))

    for _ <- 1..4, do: assert({:atomic, :ok} = FraghashExample.grow(:item))
    assert length(FraghashExample.fragments(:item)) == 8

    assert :stopped = :mnesia.stop()
    assert :ok = :mnesia.start()
    assert :ok = FraghashExample.wait(:item, 30_000)

    props = :mnesia.table_info(:item, :frag_properties)
    assert props[:hash_module] == :mnesia_frag_slots
    assert props[:n_fragments] == 8

    missing = for k <- 1..@records, FraghashExample.get(:item, k) != [{:item, k, k * k}], do: k
    assert missing == []

    # Reads go through the hash, so a total of exactly @records also shows
    # that no record was left behind as a stale copy in its old fragment.
    sizes = FraghashExample.sizes(:item)
    assert Enum.sum(sizes) == @records
    assert Enum.all?(sizes, &(&1 > 0))
  end
end
