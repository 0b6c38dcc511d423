-- sqlenv demo database: bikeshare
-- A city bike-share scheme: docking stations, the bike fleet, riders and trips (spring 2024).

CREATE TABLE stations (
    station_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    neighborhood TEXT NOT NULL,
    capacity INTEGER NOT NULL,
    latitude REAL NOT NULL,
    longitude REAL NOT NULL,
    opened_date TEXT NOT NULL
);

CREATE TABLE bikes (
    bike_id INTEGER PRIMARY KEY,
    model TEXT NOT NULL,
    bike_type TEXT NOT NULL,
    purchase_date TEXT NOT NULL,
    home_station_id INTEGER REFERENCES stations(station_id),
    status TEXT NOT NULL
);

CREATE TABLE riders (
    rider_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    birth_year INTEGER,
    plan TEXT NOT NULL,
    signup_date TEXT NOT NULL
);

CREATE TABLE trips (
    trip_id INTEGER PRIMARY KEY,
    bike_id INTEGER NOT NULL,
    rider_id INTEGER NOT NULL,
    start_station_id INTEGER NOT NULL,
    end_station_id INTEGER NOT NULL,
    start_time TEXT NOT NULL,
    duration_minutes INTEGER NOT NULL,
    distance_km REAL NOT NULL,
    fare REAL NOT NULL,
    rating INTEGER,
    FOREIGN KEY (bike_id) REFERENCES bikes(bike_id),
    FOREIGN KEY (rider_id) REFERENCES riders(rider_id),
    FOREIGN KEY (start_station_id) REFERENCES stations(station_id),
    FOREIGN KEY (end_station_id) REFERENCES stations(station_id)
);

INSERT INTO stations (station_id, name, neighborhood, capacity, latitude, longitude, opened_date) VALUES (1, 'Harbor Square', 'Waterfront', 38, 47.6145, -122.3409, '2018-05-21');
INSERT INTO stations (station_id, name, neighborhood, capacity, latitude, longitude, opened_date) VALUES (2, 'Pier 7', 'Waterfront', 18, 47.6469, -122.3387, '2021-03-23');
INSERT INTO stations (station_id, name, neighborhood, capacity, latitude, longitude, opened_date) VALUES (3, 'Maritime Museum', 'Waterfront', 13, 47.5702, -122.3307, '2022-01-11');
INSERT INTO stations (station_id, name, neighborhood, capacity, latitude, longitude, opened_date) VALUES (4, 'City Hall', 'Downtown', 18, 47.5827, -122.3746, '2021-05-18');
INSERT INTO stations (station_id, name, neighborhood, capacity, latitude, longitude, opened_date) VALUES (5, 'Central Library', 'Downtown', 31, 47.6022, -122.2997, '2021-03-05');
INSERT INTO stations (station_id, name, neighborhood, capacity, latitude, longitude, opened_date) VALUES (6, 'Union Station', 'Downtown', 26, 47.5771, -122.3845, '2018-02-24');
INSERT INTO stations (station_id, name, neighborhood, capacity, latitude, longitude, opened_date) VALUES (7, 'Market & 5th', 'Downtown', 35, 47.5539, -122.3587, '2018-02-23');
INSERT INTO stations (station_id, name, neighborhood, capacity, latitude, longitude, opened_date) VALUES (8, 'Oak Park North', 'Oak Park', 16, 47.5625, -122.3747, '2018-08-21');
INSERT INTO stations (station_id, name, neighborhood, capacity, latitude, longitude, opened_date) VALUES (9, 'Oak Park South', 'Oak Park', 32, 47.5936, -122.3615, '2020-02-05');
INSERT INTO stations (station_id, name, neighborhood, capacity, latitude, longitude, opened_date) VALUES (10, 'Elm Street', 'Oak Park', 17, 47.5792, -122.2862, '2018-11-18');
INSERT INTO stations (station_id, name, neighborhood, capacity, latitude, longitude, opened_date) VALUES (11, 'University Gate', 'Campus', 19, 47.6113, -122.2949, '2020-07-21');
INSERT INTO stations (station_id, name, neighborhood, capacity, latitude, longitude, opened_date) VALUES (12, 'Science Quad', 'Campus', 29, 47.5849, -122.371, '2022-05-25');
INSERT INTO stations (station_id, name, neighborhood, capacity, latitude, longitude, opened_date) VALUES (13, 'Stadium East', 'Campus', 21, 47.5611, -122.3662, '2019-10-20');
INSERT INTO stations (station_id, name, neighborhood, capacity, latitude, longitude, opened_date) VALUES (14, 'Riverside Walk', 'Riverside', 11, 47.6457, -122.2736, '2020-07-15');
INSERT INTO stations (station_id, name, neighborhood, capacity, latitude, longitude, opened_date) VALUES (15, 'Mill Bridge', 'Riverside', 29, 47.5605, -122.2798, '2018-01-21');
INSERT INTO stations (station_id, name, neighborhood, capacity, latitude, longitude, opened_date) VALUES (16, 'Old Brewery', 'Riverside', 22, 47.6458, -122.3537, '2017-08-10');
INSERT INTO stations (station_id, name, neighborhood, capacity, latitude, longitude, opened_date) VALUES (17, 'Hillcrest Plaza', 'Hillcrest', 28, 47.6164, -122.334, '2021-02-04');
INSERT INTO stations (station_id, name, neighborhood, capacity, latitude, longitude, opened_date) VALUES (18, 'McArthur Ave', 'Hillcrest', 11, 47.5672, -122.3029, '2021-02-22');

INSERT INTO bikes (bike_id, model, bike_type, purchase_date, home_station_id, status) VALUES (1, 'Voltra E2 Plus', 'electric', '2017-04-19', 5, 'retired');
INSERT INTO bikes (bike_id, model, bike_type, purchase_date, home_station_id, status) VALUES (2, 'Cityline C3', 'classic', '2017-02-22', 6, 'active');
INSERT INTO bikes (bike_id, model, bike_type, purchase_date, home_station_id, status) VALUES (3, 'Cityline C3', 'classic', '2021-02-12', 1, 'active');
INSERT INTO bikes (bike_id, model, bike_type, purchase_date, home_station_id, status) VALUES (4, 'Roadster Lite', 'classic', '2019-04-24', 3, 'maintenance');
INSERT INTO bikes (bike_id, model, bike_type, purchase_date, home_station_id, status) VALUES (5, 'Voltra E2 Plus', 'electric', '2019-11-07', 18, 'maintenance');
INSERT INTO bikes (bike_id, model, bike_type, purchase_date, home_station_id, status) VALUES (6, 'Voltra E2 Plus', 'electric', '2022-04-13', 8, 'active');
INSERT INTO bikes (bike_id, model, bike_type, purchase_date, home_station_id, status) VALUES (7, 'Cityline C3', 'classic', '2019-08-18', 16, 'active');
INSERT INTO bikes (bike_id, model, bike_type, purchase_date, home_station_id, status) VALUES (8, 'Roadster Lite', 'classic', '2021-09-08', 2, 'active');
INSERT INTO bikes (bike_id, model, bike_type, purchase_date, home_station_id, status) VALUES (9, 'Voltra E1', 'electric', '2021-03-17', 17, 'maintenance');
INSERT INTO bikes (bike_id, model, bike_type, purchase_date, home_station_id, status) VALUES (10, 'Roadster Lite', 'classic', '2020-06-26', 12, 'active');
INSERT INTO bikes (bike_id, model, bike_type, purchase_date, home_station_id, status) VALUES (11, 'Cityline C5', 'classic', '2023-01-10', 18, 'retired');
INSERT INTO bikes (bike_id, model, bike_type, purchase_date, home_station_id, status) VALUES (12, 'Voltra E2 Plus', 'electric', '2018-05-03', 18, 'active');
INSERT INTO bikes (bike_id, model, bike_type, purchase_date, home_station_id, status) VALUES (13, 'Cityline C5', 'classic', '2022-07-07', 10, 'active');
INSERT INTO bikes (bike_id, model, bike_type, purchase_date, home_station_id, status) VALUES (14, 'Roadster Lite', 'classic', '2019-06-23', 9, 'active');
INSERT INTO bikes (bike_id, model, bike_type, purchase_date, home_station_id, status) VALUES (15, 'Roadster Lite', 'classic', '2018-09-01', 15, 'active');
INSERT INTO bikes (bike_id, model, bike_type, purchase_date, home_station_id, status) VALUES (16, 'Roadster Lite', 'classic', '2022-04-24', 7, 'active');
INSERT INTO bikes (bike_id, model, bike_type, purchase_date, home_station_id, status) VALUES (17, 'Voltra E1', 'electric', '2019-07-22', 7, 'active');
INSERT INTO bikes (bike_id, model, bike_type, purchase_date, home_station_id, status) VALUES (18, 'Voltra E1', 'electric', '2019-03-23', 7, 'active');
INSERT INTO bikes (bike_id, model, bike_type, purchase_date, home_station_id, status) VALUES (19, 'Cityline C5', 'classic', '2017-03-26', 15, 'active');
INSERT INTO bikes (bike_id, model, bike_type, purchase_date, home_station_id, status) VALUES (20, 'Voltra E1', 'electric', '2020-10-13', 10, 'active');
INSERT INTO bikes (bike_id, model, bike_type, purchase_date, home_station_id, status) VALUES (21, 'Cityline C5', 'classic', '2021-06-11', 5, 'active');
INSERT INTO bikes (bike_id, model, bike_type, purchase_date, home_station_id, status) VALUES (22, 'Cityline C3', 'classic', '2021-07-19', NULL, 'active');
INSERT INTO bikes (bike_id, model, bike_type, purchase_date, home_station_id, status) VALUES (23, 'Cityline C5', 'classic', '2017-07-22', 13, 'retired');
INSERT INTO bikes (bike_id, model, bike_type, purchase_date, home_station_id, status) VALUES (24, 'Voltra E1', 'electric', '2020-03-09', 5, 'active');
INSERT INTO bikes (bike_id, model, bike_type, purchase_date, home_station_id, status) VALUES (25, 'Roadster Lite', 'classic', '2019-02-09', 6, 'active');
INSERT INTO bikes (bike_id, model, bike_type, purchase_date, home_station_id, status) VALUES (26, 'Cityline C5', 'classic', '2022-01-24', 12, 'active');
INSERT INTO bikes (bike_id, model, bike_type, purchase_date, home_station_id, status) VALUES (27, 'Voltra E1', 'electric', '2022-10-25', 1, 'retired');
INSERT INTO bikes (bike_id, model, bike_type, purchase_date, home_station_id, status) VALUES (28, 'Cityline C5', 'classic', '2017-03-18', 18, 'active');
INSERT INTO bikes (bike_id, model, bike_type, purchase_date, home_station_id, status) VALUES (29, 'Voltra E1', 'electric', '2022-11-21', 3, 'active');
INSERT INTO bikes (bike_id, model, bike_type, purchase_date, home_station_id, status) VALUES (30, 'Voltra E1', 'electric', '2020-03-29', 12, 'active');
INSERT INTO bikes (bike_id, model, bike_type, purchase_date, home_station_id, status) VALUES (31, 'Voltra E2 Plus', 'electric', '2021-01-29', 13, 'maintenance');
INSERT INTO bikes (bike_id, model, bike_type, purchase_date, home_station_id, status) VALUES (32, 'Voltra E2 Plus', 'electric', '2022-12-29', 18, 'active');
INSERT INTO bikes (bike_id, model, bike_type, purchase_date, home_station_id, status) VALUES (33, 'Cityline C3', 'classic', '2019-06-27', 12, 'active');
INSERT INTO bikes (bike_id, model, bike_type, purchase_date, home_station_id, status) VALUES (34, 'Cityline C5', 'classic', '2021-09-16', 8, 'active');
INSERT INTO bikes (bike_id, model, bike_type, purchase_date, home_station_id, status) VALUES (35, 'Voltra E2 Plus', 'electric', '2018-01-11', 3, 'retired');

INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (1, 'Emma Zielinski', 2003, 'annual', '2021-12-19');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (2, 'Daniel Zielinski', 1972, 'annual', '2022-05-06');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (3, 'Yara Walsh', 1977, 'annual', '2020-12-27');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (4, 'Umar McKenzie', 2001, 'annual', '2023-12-23');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (5, 'Vera Quinlan', NULL, 'annual', '2021-12-21');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (6, 'Samir Garcia', 1959, 'annual', '2023-01-24');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (7, 'Quinn Zielinski', 2000, 'monthly', '2021-08-21');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (8, 'Ben Xu', 1992, 'casual', '2020-05-15');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (9, 'Ximena van der Berg', 1974, 'casual', '2020-01-13');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (10, 'Uma Xu', 1981, 'annual', '2021-05-06');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (11, 'Pedro Brennan', 2004, 'casual', '2023-05-01');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (12, 'Maya Kowalski', NULL, 'annual', '2021-11-12');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (13, 'Ivan Nakamura', 1958, 'casual', '2021-11-06');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (14, 'Hanna Garcia', 1995, 'casual', '2021-05-25');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (15, 'Gabriel Kowalski', 1965, 'monthly', '2022-01-30');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (16, 'Jonas Garcia', NULL, 'annual', '2021-06-14');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (17, 'Ximena Umarov', 1977, 'annual', '2023-09-04');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (18, 'Priya O''Brien', 1971, 'casual', '2023-10-28');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (19, 'Ben Quinlan', 1960, 'annual', '2022-06-30');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (20, 'Jonas Anderson', 1957, 'casual', '2022-06-16');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (21, 'Hiro Eriksen', 2004, 'monthly', '2023-10-04');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (22, 'Nora MacLeod', 1956, 'annual', '2020-02-29');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (23, 'Pedro van der Berg', 1979, 'annual', '2023-07-03');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (24, 'Bianca DeLuca', 1974, 'annual', '2021-09-26');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (25, 'Fiona Rossi', 1989, 'casual', '2020-08-25');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (26, 'Marco Tanaka', NULL, 'casual', '2020-08-28');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (27, 'Quinn Varga', 1972, 'annual', '2020-12-17');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (28, 'Ximena Jensen', 1979, 'monthly', '2021-10-14');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (29, 'Sara Patel', 1966, 'monthly', '2023-09-25');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (30, 'Rosa Eriksen', 1976, 'casual', '2023-11-27');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (31, 'Ben Kowalski', 1992, 'annual', '2020-08-23');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (32, 'Kofi Garcia', 1986, 'annual', '2021-04-24');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (33, 'William Patel', NULL, 'annual', '2023-08-17');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (34, 'Daniel O''Brien', 1980, 'annual', '2023-03-06');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (35, 'Lena Okafor', 1980, 'annual', '2020-08-07');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (36, 'Hanna Nakamura', 1974, 'annual', '2021-04-15');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (37, 'Elliot Patel', 1991, 'annual', '2022-08-28');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (38, 'Jonas Umarov', 1963, 'casual', '2022-12-18');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (39, 'Isabel McKenzie', 1968, 'casual', '2020-04-13');
INSERT INTO riders (rider_id, name, birth_year, plan, signup_date) VALUES (40, 'Zane Ito', 1997, 'monthly', '2023-02-02');

INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (1, 22, 34, 4, 2, '2024-04-01 09:35', 25, 3.49, 0.0, 2);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (2, 9, 22, 18, 9, '2024-04-02 11:05', 17, 3.97, 1.7, 2);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (3, 15, 36, 1, 14, '2024-04-04 16:40', 47, 8.97, 0.3, NULL);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (4, 30, 19, 14, 9, '2024-04-05 16:32', 10, 3.28, 1.0, 5);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (5, 20, 13, 5, 2, '2024-04-06 19:15', 23, 3.51, 9.05, 4);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (6, 18, 21, 6, 5, '2024-04-07 22:23', 13, 2.26, 1.95, 3);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (7, 16, 15, 12, 12, '2024-04-08 08:34', 28, 4.09, 2.8, 3);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (8, 20, 12, 3, 10, '2024-04-08 17:20', 28, 8.83, 2.8, 2);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (9, 30, 12, 4, 12, '2024-04-09 18:11', 26, 5.63, 2.6, 4);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (10, 33, 5, 2, 2, '2024-04-09 18:58', 16, 1.21, 0.0, 1);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (11, 21, 11, 8, 7, '2024-04-10 11:56', 34, 6.51, 9.5, NULL);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (12, 5, 37, 16, 16, '2024-04-10 14:59', 20, 3.72, 2.0, 2);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (13, 25, 12, 17, 13, '2024-04-12 10:47', 45, 8.82, 0.0, 1);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (14, 15, 23, 10, 5, '2024-04-13 06:39', 26, 4.53, 0.0, 1);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (15, 26, 18, 2, 3, '2024-04-13 13:49', 18, 1.95, 5.5, 4);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (16, 7, 29, 17, 16, '2024-04-13 19:02', 48, 9.2, 4.8, NULL);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (17, 5, 16, 16, 8, '2024-04-13 19:16', 20, 4.13, 2.0, 3);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (18, 14, 7, 4, 4, '2024-04-13 20:00', 10, 2.06, 1.0, 2);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (19, 33, 9, 13, 10, '2024-04-14 08:55', 37, 8.19, 10.25, 3);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (20, 6, 30, 3, 2, '2024-04-14 20:22', 3, 0.52, 2.05, 5);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (21, 7, 32, 4, 4, '2024-04-15 14:43', 19, 1.63, 0.0, 1);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (22, 29, 33, 8, 8, '2024-04-15 14:45', 30, 6.0, 3.0, 3);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (23, 14, 40, 14, 10, '2024-04-16 13:14', 27, 4.85, 2.7, 2);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (24, 20, 22, 1, 1, '2024-04-17 06:33', 5, 1.61, 0.5, 4);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (25, 15, 35, 13, 6, '2024-04-17 20:34', 33, 6.09, 0.0, 4);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (26, 31, 26, 5, 9, '2024-04-19 14:34', 39, 8.72, 14.65, 5);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (27, 33, 3, 7, 13, '2024-04-20 08:44', 36, 7.59, 0.0, 1);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (28, 24, 4, 16, 15, '2024-04-21 20:30', 15, 1.07, 1.5, 2);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (29, 5, 17, 6, 13, '2024-04-23 11:54', 32, 8.62, 3.2, 3);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (30, 6, 22, 4, 11, '2024-04-23 22:20', 14, 2.86, 1.4, 5);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (31, 10, 39, 11, 11, '2024-04-23 22:22', 19, 3.89, 5.75, 5);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (32, 28, 13, 12, 12, '2024-04-24 06:52', 14, 2.63, 4.5, NULL);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (33, 25, 21, 11, 13, '2024-04-24 20:17', 15, 1.42, 1.5, 5);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (34, 33, 19, 2, 8, '2024-04-26 11:45', 46, 9.26, 0.15, NULL);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (35, 5, 15, 14, 18, '2024-04-28 12:35', 31, 7.77, 4.65, 2);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (36, 32, 12, 16, 17, '2024-04-29 13:05', 21, 3.33, 2.1, 1);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (37, 14, 29, 1, 7, '2024-04-29 14:16', 27, 5.99, 2.7, 2);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (38, 32, 28, 12, 2, '2024-04-29 22:53', 22, 4.5, 3.3, 2);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (39, 17, 18, 7, 4, '2024-04-30 07:02', 10, 1.74, 4.5, 3);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (40, 18, 37, 14, 1, '2024-04-30 14:53', 25, 4.39, 2.5, 4);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (41, 34, 20, 5, 16, '2024-04-30 17:17', 26, 5.21, 7.5, 5);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (42, 5, 35, 1, 18, '2024-05-01 09:58', 21, 5.11, 2.1, 3);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (43, 6, 6, 5, 5, '2024-05-01 12:29', 8, 0.82, 0.8, 3);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (44, 31, 9, 16, 13, '2024-05-01 15:53', 21, 2.91, 8.35, 2);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (45, 19, 30, 4, 7, '2024-05-02 13:47', 15, 1.85, 4.75, NULL);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (46, 19, 26, 7, 17, '2024-05-02 21:35', 39, 7.86, 10.75, NULL);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (47, 32, 25, 13, 8, '2024-05-03 09:44', 12, 2.35, 5.2, 1);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (48, 10, 6, 15, 3, '2024-05-04 14:16', 28, 4.66, 0.0, 4);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (49, 22, 21, 15, 8, '2024-05-05 12:16', 20, 3.53, 2.0, NULL);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (50, 15, 36, 10, 9, '2024-05-05 13:50', 16, 2.32, 0.0, 3);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (51, 8, 24, 12, 14, '2024-05-05 14:14', 19, 3.33, 0.0, 2);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (52, 34, 22, 3, 8, '2024-05-06 14:21', 50, 9.02, 0.75, 2);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (53, 14, 36, 17, 15, '2024-05-07 10:11', 28, 5.48, 0.0, NULL);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (54, 17, 28, 15, 12, '2024-05-07 15:58', 26, 4.7, 3.9, 1);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (55, 12, 12, 9, 9, '2024-05-07 16:23', 21, 5.92, 2.1, 1);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (56, 9, 9, 13, 10, '2024-05-07 16:24', 13, 2.54, 5.55, 3);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (57, 7, 30, 6, 7, '2024-05-08 16:52', 9, 1.81, 3.25, 2);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (58, 28, 31, 9, 18, '2024-05-09 08:52', 23, 3.71, 0.0, 4);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (59, 29, 36, 16, 16, '2024-05-09 12:30', 10, 2.48, 1.0, 5);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (60, 10, 15, 4, 15, '2024-05-09 16:11', 35, 6.8, 3.5, NULL);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (61, 24, 19, 1, 1, '2024-05-09 17:23', 25, 5.46, 2.5, 4);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (62, 26, 20, 1, 4, '2024-05-09 20:36', 42, 8.72, 11.5, NULL);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (63, 2, 36, 6, 6, '2024-05-10 06:50', 37, 5.64, 0.0, 4);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (64, 29, 25, 4, 11, '2024-05-10 11:32', 27, 7.8, 10.45, NULL);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (65, 25, 1, 11, 13, '2024-05-10 15:38', 4, 1.05, 0.0, 5);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (66, 2, 29, 11, 1, '2024-05-10 21:46', 42, 6.79, 4.2, 3);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (67, 7, 11, 5, 5, '2024-05-11 12:21', 12, 2.22, 4.0, NULL);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (68, 7, 29, 11, 11, '2024-05-12 13:40', 21, 2.68, 2.1, NULL);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (69, 34, 5, 18, 8, '2024-05-12 15:08', 32, 6.36, 0.0, 3);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (70, 34, 5, 4, 13, '2024-05-13 07:42', 17, 3.15, 0.0, 4);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (71, 32, 36, 15, 1, '2024-05-13 22:57', 34, 8.02, 3.4, 1);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (72, 32, 4, 10, 13, '2024-05-14 10:04', 14, 3.37, 1.4, NULL);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (73, 34, 31, 8, 8, '2024-05-14 14:01', 15, 0.91, 0.0, 1);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (74, 13, 29, 15, 6, '2024-05-14 19:08', 39, 8.77, 3.9, 1);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (75, 3, 34, 10, 2, '2024-05-14 20:29', 40, 6.69, 0.0, 4);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (76, 5, 40, 8, 16, '2024-05-15 06:55', 34, 7.84, 5.1, 4);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (77, 8, 30, 3, 18, '2024-05-15 14:27', 39, 8.29, 10.75, 3);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (78, 16, 30, 12, 16, '2024-05-15 19:54', 48, 9.35, 13.0, 5);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (79, 7, 12, 10, 14, '2024-05-15 22:50', 24, 4.12, 0.0, 2);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (80, 24, 38, 1, 13, '2024-05-16 06:58', 26, 6.82, 10.1, NULL);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (81, 16, 30, 6, 12, '2024-05-16 07:47', 21, 4.66, 6.25, NULL);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (82, 6, 21, 2, 2, '2024-05-16 17:48', 12, 2.22, 1.8, 3);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (83, 31, 2, 16, 5, '2024-05-18 12:57', 16, 2.09, 1.6, NULL);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (84, 26, 38, 4, 9, '2024-05-18 19:28', 37, 6.28, 10.25, 5);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (85, 34, 1, 3, 14, '2024-05-19 13:40', 43, 8.26, 0.0, 5);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (86, 34, 37, 9, 11, '2024-05-19 15:59', 31, 4.61, 0.0, 1);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (87, 18, 2, 11, 13, '2024-05-20 15:05', 13, 2.36, 1.3, 1);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (88, 2, 4, 8, 14, '2024-05-21 14:11', 23, 3.15, 0.0, 5);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (89, 34, 31, 11, 7, '2024-05-21 16:28', 22, 3.85, 0.0, 1);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (90, 7, 6, 17, 17, '2024-05-23 20:11', 20, 4.39, 0.0, 5);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (91, 34, 2, 13, 16, '2024-05-24 06:20', 21, 3.56, 0.0, 3);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (92, 29, 32, 1, 3, '2024-05-24 07:38', 13, 2.4, 1.3, NULL);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (93, 30, 4, 7, 1, '2024-05-24 18:32', 15, 4.81, 1.5, 3);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (94, 17, 22, 2, 5, '2024-05-25 16:12', 25, 6.61, 2.5, 3);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (95, 25, 7, 15, 11, '2024-05-25 18:10', 46, 9.3, 4.6, 4);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (96, 30, 27, 1, 3, '2024-05-25 21:51', 5, 1.61, 0.5, NULL);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (97, 29, 40, 13, 2, '2024-05-26 06:05', 14, 3.68, 2.1, 3);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (98, 17, 11, 4, 7, '2024-05-27 11:32', 7, 1.46, 3.45, 5);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (99, 24, 26, 4, 16, '2024-05-27 16:55', 16, 4.19, 6.6, NULL);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (100, 7, 5, 18, 12, '2024-05-28 07:16', 37, 8.35, 0.0, 2);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (101, 19, 12, 6, 1, '2024-05-28 18:08', 44, 8.2, 0.0, NULL);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (102, 4, 5, 1, 4, '2024-05-28 20:44', 23, 5.25, 0.0, 1);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (103, 15, 31, 12, 13, '2024-05-29 08:13', 10, 0.82, 0.0, 2);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (104, 31, 15, 4, 14, '2024-05-30 20:34', 36, 7.5, 5.4, 1);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (105, 9, 8, 3, 11, '2024-05-31 12:53', 29, 6.59, 11.15, 2);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (106, 16, 37, 6, 1, '2024-05-31 21:11', 23, 2.68, 0.0, 2);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (107, 14, 16, 7, 17, '2024-06-01 15:27', 47, 8.9, 0.3, 3);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (108, 34, 39, 1, 1, '2024-06-02 18:03', 26, 3.26, 7.5, 1);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (109, 13, 1, 6, 6, '2024-06-02 19:27', 24, 4.16, 0.0, NULL);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (110, 17, 8, 14, 13, '2024-06-04 19:11', 18, 4.03, 7.3, 1);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (111, 32, 34, 11, 17, '2024-06-06 07:10', 18, 3.55, 1.8, 4);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (112, 16, 1, 4, 13, '2024-06-07 06:58', 24, 4.98, 0.0, 5);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (113, 13, 31, 16, 18, '2024-06-07 10:56', 33, 5.69, 0.0, 5);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (114, 25, 16, 11, 7, '2024-06-07 16:09', 28, 3.69, 0.0, 2);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (115, 5, 4, 11, 1, '2024-06-07 18:27', 14, 3.94, 1.4, 1);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (116, 13, 34, 1, 8, '2024-06-08 11:23', 28, 6.23, 0.0, 3);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (117, 28, 6, 11, 15, '2024-06-08 11:52', 37, 8.37, 0.0, 4);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (118, 34, 17, 10, 6, '2024-06-08 16:40', 32, 6.37, 0.0, NULL);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (119, 16, 35, 4, 16, '2024-06-08 22:00', 28, 4.77, 0.0, NULL);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (120, 8, 19, 11, 11, '2024-06-09 06:30', 31, 5.82, 0.0, 5);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (121, 21, 38, 11, 3, '2024-06-10 14:17', 11, 2.22, 3.75, 1);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (122, 8, 30, 16, 2, '2024-06-10 17:09', 36, 7.82, 10.0, 3);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (123, 15, 37, 7, 8, '2024-06-11 12:24', 38, 7.33, 0.0, 5);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (124, 13, 21, 4, 4, '2024-06-11 17:26', 14, 0.99, 1.4, 2);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (125, 21, 4, 3, 2, '2024-06-12 11:43', 7, 1.45, 0.0, NULL);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (126, 19, 10, 13, 13, '2024-06-12 14:04', 14, 3.13, 0.0, 2);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (127, 15, 13, 17, 15, '2024-06-12 14:31', 25, 3.12, 7.25, NULL);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (128, 21, 11, 9, 11, '2024-06-12 16:14', 15, 2.95, 4.75, 4);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (129, 17, 6, 11, 7, '2024-06-12 16:40', 33, 7.69, 3.3, 3);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (130, 21, 25, 11, 1, '2024-06-14 06:19', 28, 5.84, 8.0, 5);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (131, 34, 35, 2, 4, '2024-06-14 11:23', 42, 9.37, 0.0, 3);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (132, 21, 25, 1, 11, '2024-06-16 07:00', 34, 6.31, 9.5, 1);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (133, 15, 35, 3, 6, '2024-06-16 20:17', 20, 4.57, 0.0, 3);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (134, 7, 15, 6, 7, '2024-06-17 08:25', 15, 1.02, 1.5, NULL);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (135, 25, 7, 14, 14, '2024-06-17 11:01', 23, 3.35, 2.3, 4);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (136, 16, 27, 11, 6, '2024-06-17 18:04', 45, 9.1, 0.0, 2);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (137, 2, 3, 4, 4, '2024-06-18 06:37', 26, 3.24, 0.0, NULL);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (138, 34, 7, 6, 4, '2024-06-18 08:44', 13, 0.62, 1.3, 5);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (139, 5, 8, 5, 5, '2024-06-18 11:02', 16, 5.17, 6.6, 3);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (140, 20, 37, 4, 5, '2024-06-18 15:34', 9, 2.25, 0.9, 2);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (141, 20, 17, 15, 10, '2024-06-20 14:39', 14, 2.29, 1.4, 4);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (142, 17, 10, 9, 11, '2024-06-22 09:12', 29, 9.1, 2.9, 5);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (143, 4, 31, 1, 1, '2024-06-23 21:04', 20, 4.53, 0.0, NULL);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (144, 22, 19, 9, 2, '2024-06-24 06:09', 43, 8.84, 0.0, 2);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (145, 32, 15, 3, 17, '2024-06-24 10:53', 19, 2.93, 2.85, NULL);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (146, 15, 17, 13, 1, '2024-06-24 11:41', 23, 2.62, 0.0, 2);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (147, 13, 4, 1, 1, '2024-06-26 13:26', 8, 0.86, 0.0, 5);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (148, 12, 16, 6, 3, '2024-06-27 06:23', 28, 7.1, 2.8, 1);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (149, 30, 14, 10, 3, '2024-06-28 16:46', 31, 7.35, 11.85, 5);
INSERT INTO trips (trip_id, bike_id, rider_id, start_station_id, end_station_id, start_time, duration_minutes, distance_km, fare, rating) VALUES (150, 20, 37, 7, 1, '2024-06-30 06:34', 19, 5.8, 1.9, 1);
