"""The Kubernetes adapter around the core loop: the only package that talks to the API server.

Layout (each module small, each with one reason to change):

* ``operator``  kopf wiring (thin ``on.event`` handlers), the worker thread, the HTTP endpoints;
* ``engine``    watch events → ``AdvisorCore`` → decisions → statuses (single-threaded);
* ``actuator``  carrying out decisions, idempotently by request id recorded before the mutation;
* ``writer``    coalesced, rate-limited ``TrainJobForecast`` status writes;
* ``render`` / ``summary``  what the status and the per-queue view say (pure);
* ``kueue``     a thin typed Kueue client over ``CustomObjectsApi``; ``jobs`` the job kinds;
* ``api``       every API call the controller makes; ``metrics`` Prometheus; ``cliutil`` CLI helpers.

Nothing is imported here, so that ``import advisor.controller.render`` stays light.
"""
