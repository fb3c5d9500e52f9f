"""The Kubernetes adapter around the core loop: the only package that talks to the API server.

Layout (each module small, each with one reason to change):

* ``operator``  kopf wiring (thin ``on.event`` handlers), the worker thread; ``operator_options``
  what it is asked to do; ``initial_listing`` the start-up listing; ``http_endpoints`` the HTTP
  endpoints;
* ``engine``    watch events → ``AdvisorCore`` → decisions → statuses (single-threaded);
  ``trackedjob`` what it keeps per job; ``policyevents`` the AdvisorPolicy events;
  ``figureschedule`` when the policies' figures are written;
* ``actuator``  carrying out decisions, idempotently by request id recorded before the mutation;
  ``jobevents`` the Events it posts; ``actionaudit`` its audit lines;
* ``policystatus`` the AdvisorPolicy status figures (pure); ``policybook`` the policies and their
  status writes;
* ``writer``    coalesced, rate-limited ``TrainJobForecast`` status writes;
* ``render`` / ``summary``  what the status and the per-queue view say (pure);
* ``kueue``     a thin typed Kueue client over ``CustomObjectsApi``; ``jobs`` the job kinds;
* ``api``       every API call the controller makes; ``metrics`` Prometheus; ``cliutil`` CLI helpers.

Nothing is imported here, so that ``import advisor.controller.render`` stays light.
"""
