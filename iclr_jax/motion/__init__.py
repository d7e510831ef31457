"""Human motion in HumanML3D's format."""
