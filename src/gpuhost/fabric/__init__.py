"""The host's network fabric: what it should be (``expected``: node classes as data, inventory
override), what it is (``model.FabricFacts``, read by the probe and the checks with
``gpuhost.parsers.fabric``), the judgement (``judge``: pure, facts in, findings out) and the error
counters kept between runs (``counters``). docs/fabric.md."""
