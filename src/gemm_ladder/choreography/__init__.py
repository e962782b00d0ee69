"""The mbarrier choreography: simulator, timeline model, measured traces, page, GPU what-ifs."""
