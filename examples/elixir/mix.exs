defmodule FraghashExample.MixProject do
  use Mix.Project

  def project do
    [
      app: :fraghash_example,
      version: "0.1.0",
      elixir: "~> 1.14",
      start_permanent: Mix.env() == :prod,
      deps: deps()
    ]
  end

  def application do
    [extra_applications: [:logger, :mnesia]]
  end

  # fraghash is a rebar3 application; its build hook compiles the NIF with
  # cargo. From git instead of a path:
  #   {:fraghash, git: "<repository URL>", branch: "main", manager: :rebar3}
  defp deps do
    [{:fraghash, path: "../..", manager: :rebar3}]
  end
end
