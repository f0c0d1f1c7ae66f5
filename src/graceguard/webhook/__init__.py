"""The eviction admission webhook's service layer: AdmissionReviews in, answers and reports out;
the decision is ``engine.admission``, the HTTPS server and the cluster cache are adapters."""
