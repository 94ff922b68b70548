"""Recording: the one forward pass of a crawl and what it counts.

Global module hooks open one layer record per module call (:mod:`.recorder`, with the one leaf rule
of :mod:`.module_info`); one dispatch mode counts every operator with the one formula table
(:mod:`.operator_counter`, :mod:`.operator_table`); module formulas are evaluated per metric-leaf
call (:mod:`.module_metrics`); everything else observes the pass (:mod:`.observers`). This room
imports the formulas and nothing else of the engine but its report types.
"""
