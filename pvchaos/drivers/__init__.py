"""Storage drivers as objects the suites ask for classes and capabilities (driver.py),
and the strict reader of upstream's driver profile files (profile.py)."""
