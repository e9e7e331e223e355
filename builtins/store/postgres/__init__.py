"""The PostgreSQL tape store: connections and leases, its SQL, and its checks."""
