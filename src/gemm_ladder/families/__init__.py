"""The kernel families: the ladder's steps (ladder_step, ladder), the small-M split-K family
(smallm, smallm_args, splitk_deal), stream-K (streamk), the parser of every family's keys
(keys), and the cost model their choice is priced with (cost_model)."""
