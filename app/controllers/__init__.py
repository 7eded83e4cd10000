"""What a user action sets going across views and services: experiments from the menu, reports."""
