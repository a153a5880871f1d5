"""crosscurv tests: theory (a package, so same-named test modules in different folders do not
clash).
"""
